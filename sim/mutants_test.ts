// The checker can fail: every mutant core is caught by the default sweep
// (TigerBeetle's canary; conventions §6, P5).
import assert from "node:assert/strict";
import { MUTANTS } from "./mutants.ts";
import { parseSeed } from "./prng.ts";
import { runScenario } from "./run_scenario.ts";
import { DEFAULT_RUNS, DEFAULT_SEED, sweep } from "./sweep.ts";

const EXPECTED: Record<string, string[]> = {
  skip_requeue_cap: ["requeueCap"],
  late_chunks: ["nothingAfterEnd"],
  over_dispatch: ["maxConcurrent"],
  cancel_queued: ["cancelWhenAbandoned"],
  no_round_robin: ["lowestLoad"],
  extend_deadline_on_requeue: ["requeueCap", "deadline"],
  late_queue_timeout: ["deadline"],
};

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
