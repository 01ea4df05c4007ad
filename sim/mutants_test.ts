// The checker can fail: every mutant core is caught by the default sweep
// (TigerBeetle's canary; conventions §6, P5), and the spec 004 ones also by
// the named scenario built for them.
import assert from "node:assert/strict";
import { MUTANTS } from "./mutants.ts";
import { parseSeed } from "./prng.ts";
import { runScenario } from "./run_scenario.ts";
import { SCENARIOS } from "./scenarios/mod.ts";
import { DEFAULT_RUNS, DEFAULT_SEED, sweep } from "./sweep.ts";

const EXPECTED: Record<string, string[]> = {
  skip_requeue_cap: ["requeueCap"],
  late_chunks: ["nothingAfterEnd"],
  over_dispatch: ["maxConcurrent"],
  cancel_queued: ["cancelWhenAbandoned"],
  no_round_robin: ["lowestLoad"],
  extend_deadline_on_requeue: ["requeueCap", "deadline"],
  late_queue_timeout: ["deadline"],
  strict_priority: ["noStarvation"],
  // One class for all: the rotation then also mixes tenants the observer keeps in
  // separate classes, so the fairness bound may notice first.
  ignore_priority: ["priorityOrder", "fairnessBound"],
  fifo_ignoring_tenants: ["fairnessBound"],
  rate_counts_refused: ["rateLimit"],
  rate_forgets_window: ["rateLimit"],
  // Charged at admission, uncharged at the end: a finished stream's tokens are
  // missing from its window too.
  tokens_counted_at_admission: ["tokenLimit", "streamsCounted"],
  streams_uncounted: ["streamsCounted"],
  tenant_queue_unbounded: ["queueBound"],
  affinity_ignores_load: ["cacheAffinity"],
  lifecycle_to_unnegotiated: ["extensionFramesOnlyToNegotiated"],
  ack_extensions_to_original: ["extensionFramesOnlyToNegotiated"],
  drop_lifecycle_completion: ["lifecycleTaskEndsOnce"],
  no_lifecycle_timeout: ["lifecycleTaskEndsOnce"],
  lifecycle_ignores_target: ["lifecycleOnlyToCapable"],
  splice_error_into_stream: ["streamCarriesOnlyBackendBytes"],
  partial_event_then_next: ["wholeSseEvents"],
  requeue_to_same_worker: ["retryElsewhere"],
  requeue_oversized: ["neverRunTwiceForSize"],
  drain_as_empty_models: ["drainingModelsStayRoutable"],
  ignore_endpoint_prefixes: ["dispatchOnlyToAccepting"],
  drop_stream_head: ["streamHeadFromItsWorker"],
  release_on_cut: ["answerBytesCounted"],
};

Deno.test("every mutant has an expected catcher", () => {
  assert.deepEqual(
    MUTANTS.map((m) => m.name).sort(),
    Object.keys(EXPECTED).sort(),
  );
});

for (const m of MUTANTS) {
  Deno.test(`mutant ${m.name} (breaks ${m.breaks}) is caught by the default sweep`, () => {
    const r = sweep({
      seed: parseSeed(DEFAULT_SEED)!,
      runs: DEFAULT_RUNS,
      makeReduce: m.make,
      noShrink: true,
    });
    assert.ok(r.failure !== null, `${m.name} survived ${r.stats.runs} runs`);
    const name = r.failure.result.violation?.name ?? "";
    assert.ok(
      EXPECTED[m.name]!.includes(name),
      `${m.name} caught by ${name}, expected ${EXPECTED[m.name]}`,
    );
  });
  if (m.scenario !== undefined) {
    const scenario = SCENARIOS.get(m.scenario)!;
    Deno.test(`mutant ${m.name} is caught by scenario ${m.scenario} (every seed 1-5)`, () => {
      for (let seed = 1n; seed <= 5n; seed++) {
        const r = runScenario(scenario, seed, { reduce: m.make() });
        const name = r.violation?.name ?? "";
        assert.ok(
          EXPECTED[m.name]!.includes(name),
          `seed ${seed}: ${m.name} caught by "${name}", expected ${
            EXPECTED[m.name]
          }`,
        );
      }
    });
  }
}

Deno.test("the scenario that catches a mutant passes on the real core", () => {
  for (const m of MUTANTS) {
    const r = sweep({
      seed: parseSeed(DEFAULT_SEED)!,
      runs: DEFAULT_RUNS,
      makeReduce: m.make,
      noShrink: true,
    });
    const f = r.failure!;
    assert.equal(
      runScenario(f.scenario, BigInt(f.runSeed)).violation,
      null,
      m.name,
    );
  }
});
