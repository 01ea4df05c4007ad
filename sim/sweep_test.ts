import assert from "node:assert/strict";
import fc from "fast-check";
import { scenarioArb, swarmOf } from "./arbitrary.ts";
import { runScenario } from "./run_scenario.ts";
import { formatFailure } from "./report.ts";
import { DEFAULT_RUNS, DEFAULT_SEED, sweep } from "./sweep.ts";
import { parseSeed } from "./prng.ts";

Deno.test(`fixed-seed sweep: ${DEFAULT_RUNS} random scenarios hold every invariant`, () => {
  const seed = parseSeed(DEFAULT_SEED)!;
  const r = sweep({ seed, runs: DEFAULT_RUNS });
  const f = r.failure;
  assert.ok(
    f === null,
    f === null ? "" : formatFailure(f.result, {
      seed: DEFAULT_SEED,
      scenario: f.scenario,
      runSeed: String(f.runSeed),
      full: false,
      replay:
        `deno task sim --runs ${DEFAULT_RUNS} --seed ${DEFAULT_SEED} --path ${f.path}`,
    }),
  );
  assert.equal(r.stats.runs, DEFAULT_RUNS);
  assert.ok(
    r.stats.events > DEFAULT_RUNS * 50,
    `only ${r.stats.events} events`,
  );
});

Deno.test("generator balance: the sweep exercises spec 004, lifecycle and endpoint restrictions, and keeps runs without them", () => {
  const n = 400;
  const counts = {
    singleTenant: 0,
    fairnessWindow: 0,
    lowHeldBack: 0,
    rateLimited: 0,
    affinity: 0,
    // Issue 9: swarm off (no lifecycle at all), tasks sent, completed, timed out,
    // failed because their worker left, refused (no capable worker).
    lifecycleOff: 0,
    lifecycleSent: 0,
    lifecycleCompleted: 0,
    lifecycleTimedOut: 0,
    lifecycleWorkerLeft: 0,
    lifecycleRefused: 0,
    // Issue 25: a dispatch some worker of the model could not take; a 404/501
    // because no worker of the model takes the path or the body.
    endpointsRestricted: 0,
    endpointsRefused: 0,
  };
  const samples = fc.sample(fc.tuple(scenarioArb(), fc.nat()), {
    seed: 20260501,
    numRuns: n,
  });
  for (const [s, seed] of samples) {
    const r = runScenario(s, BigInt(seed));
    if (!swarmOf(s).includes("tenants")) counts.singleTenant++;
    if (r.sched.maxOthersAhead > 0) counts.fairnessWindow++;
    if (r.sched.maxLowWait > 0) counts.lowHeldBack++;
    if (r.sched.rateLimited > 0) counts.rateLimited++;
    if (r.sched.affinityHits > 0) counts.affinity++;
    if (!swarmOf(s).includes("lifecycle")) counts.lifecycleOff++;
    if (r.lifecycle.sent > 0) counts.lifecycleSent++;
    if (r.lifecycle.completed > 0) counts.lifecycleCompleted++;
    if (r.lifecycle.timedOut > 0) counts.lifecycleTimedOut++;
    if (r.lifecycle.workerLeft > 0) counts.lifecycleWorkerLeft++;
    if (r.lifecycle.refused > 0) counts.lifecycleRefused++;
    if (r.sched.restrictedDispatches > 0) counts.endpointsRestricted++;
    if (r.sched.pathRefusals > 0) counts.endpointsRefused++;
  }
  const text = JSON.stringify(counts);
  assert.ok(counts.singleTenant > n * 0.4, text);
  assert.ok(counts.fairnessWindow > n * 0.08, text);
  assert.ok(counts.lowHeldBack > n * 0.06, text);
  assert.ok(counts.rateLimited > n * 0.08, text);
  assert.ok(counts.affinity > n * 0.08, text);
  assert.ok(counts.lifecycleOff > n * 0.3, text);
  assert.ok(counts.lifecycleSent > n * 0.1, text);
  assert.ok(counts.lifecycleCompleted > n * 0.05, text);
  assert.ok(counts.lifecycleTimedOut > n * 0.04, text);
  assert.ok(counts.lifecycleWorkerLeft > n * 0.05, text);
  assert.ok(counts.lifecycleRefused > n * 0.1, text);
  assert.ok(counts.endpointsRestricted > n * 0.1, text);
  assert.ok(counts.endpointsRefused > n * 0.15, text);
});
