import assert from "node:assert/strict";
import {
  CLUSTER_FAULTS,
  CLUSTER_MUTANTS,
  type ClusterFault,
  type ClusterInvariant,
  type ClusterMutant,
  type ClusterRun,
  clusterScenario,
  runCluster,
} from "./cluster_world.ts";

/** Seeds of the CI sweep's cluster scenarios (`deno task test:core`). */
const SWEEP_RUNS = 150;
const SWEEP_SEED = 20261123n;

function report(seed: bigint, run: ClusterRun): string {
  return run.violations.map((v) => `seed ${seed}: ${v.invariant}: ${v.detail}`)
    .join("\n");
}

Deno.test(`cluster sweep: ${SWEEP_RUNS} seeded 2-3 instance runs with crash, stall, duplicate appends, log stall, engine blip and log reset hold every fleet invariant`, () => {
  const seen = new Set<ClusterFault>();
  let deaths = 0;
  let digestChecks = 0;
  for (let n = 0n; n < BigInt(SWEEP_RUNS); n++) {
    const seed = SWEEP_SEED + n;
    const s = clusterScenario(seed);
    const run = runCluster(s);
    assert.equal(run.violations.length, 0, report(seed, run));
    for (const f of s.faults) seen.add(f);
    deaths += run.stats.deaths;
    digestChecks += run.stats.digestChecks;
  }
  assert.deepEqual([...seen].sort(), [...CLUSTER_FAULTS].sort());
  assert.ok(deaths > SWEEP_RUNS / 4, `only ${deaths} instance deaths`);
  assert.ok(digestChecks > SWEEP_RUNS * 50, `only ${digestChecks} digests`);
});

for (const fault of CLUSTER_FAULTS) {
  Deno.test(`cluster scenario: three instances, fault "${fault}" alone, seeds 1-10 hold every fleet invariant`, () => {
    for (let seed = 1n; seed <= 10n; seed++) {
      const run = runCluster({
        seed,
        instances: 3,
        workers: 3,
        requests: 50,
        faults: [fault],
        rateLimited: true,
      });
      assert.equal(run.violations.length, 0, report(seed, run));
      assert.ok(run.stats.ended > 20);
    }
  });
}

/** The invariant each mutant must trip (proof that each invariant can fail). */
const CATCHES: Record<ClusterMutant, ClusterInvariant> = {
  noDedup: "streamExact",
  noLiveness: "noHangOnInstanceDeath",
  everyoneExecutes: "socketEffectsOnce",
  applyTimeClock: "replicasAgree",
};

for (const mutant of CLUSTER_MUTANTS) {
  Deno.test(`cluster mutant "${mutant}" is caught by ${CATCHES[mutant]} within 20 seeds`, () => {
    for (let seed = 1n; seed <= 20n; seed++) {
      const run = runCluster({
        seed,
        instances: 3,
        workers: 3,
        requests: 50,
        faults: [...CLUSTER_FAULTS],
        rateLimited: true,
      }, mutant);
      if (run.violations.some((v) => v.invariant === CATCHES[mutant])) return;
    }
    assert.fail(`mutant ${mutant} survived 20 seeds`);
  });
}

Deno.test("cluster runs are deterministic: one seed, one outcome", () => {
  const s = clusterScenario(7n);
  assert.deepEqual(runCluster(s), runCluster(s));
});
