import assert from "node:assert/strict";
import {
  CLUSTER_FAULTS,
  CLUSTER_MUTANTS,
  type ClusterFault,
  type ClusterRun,
  type ClusterScenario,
  clusterScenario,
  runCluster,
} from "./world.ts";
import { CLUSTER_MUTANT_SPECS } from "./mutants.ts";

/** Seeds of the CI sweep's cluster scenarios (`deno task test:core`). */
const SWEEP_RUNS = 150;
const SWEEP_SEED = 20261123n;

/** Three instances and three workers, both the rate and the token limit on. */
function threeByThree(
  seed: bigint,
  requests: number,
  faults: ClusterFault[],
): ClusterScenario {
  return {
    seed,
    instances: 3,
    workers: 3,
    requests,
    faults,
    rateLimited: true,
    tokenLimited: true,
  };
}

function report(seed: bigint, run: ClusterRun): string {
  return run.violations.map((v) => `seed ${seed}: ${v.invariant}: ${v.detail}`)
    .join("\n");
}

Deno.test(`cluster sweep: ${SWEEP_RUNS} seeded 2-3 instance runs with crash, stall, duplicate appends, log stall, engine blip, log reset, a graceful leave and a failover that loses the log's tail, streams going direct between instances, hold every fleet and data-path invariant`, () => {
  const seen = new Set<ClusterFault>();
  let deaths = 0;
  let digestChecks = 0;
  let snapshots = 0;
  let leaves = 0;
  let tokenReaches = 0;
  let pieces = 0;
  let whole = 0;
  let sizeCuts = 0;
  for (let n = 0n; n < BigInt(SWEEP_RUNS); n++) {
    const seed = SWEEP_SEED + n;
    const s = clusterScenario(seed);
    const run = runCluster(s);
    assert.equal(run.violations.length, 0, report(seed, run));
    for (const f of s.faults) seen.add(f);
    deaths += run.stats.deaths;
    digestChecks += run.stats.digestChecks;
    snapshots += run.stats.snapshots;
    leaves += run.stats.leaves;
    tokenReaches += run.stats.tokenLimitReached;
    pieces += run.stats.piecesSent;
    whole += run.stats.streamsWhole;
    sizeCuts += run.stats.sizeCuts;
  }
  assert.deepEqual([...seen].sort(), [...CLUSTER_FAULTS].sort());
  assert.ok(deaths > SWEEP_RUNS / 4, `only ${deaths} instance deaths`);
  assert.ok(digestChecks > SWEEP_RUNS * 8, `only ${digestChecks} digests`);
  // The data path is put to work in the same runs: pieces cross instances,
  // streams end whole, big answers are cut for size on the direct path.
  assert.ok(pieces > SWEEP_RUNS * 20, `only ${pieces} pieces sent direct`);
  assert.ok(whole > SWEEP_RUNS * 5, `only ${whole} whole streams`);
  assert.ok(sizeCuts > SWEEP_RUNS / 4, `only ${sizeCuts} size cuts`);
  // Snapshots (and the trims behind them) and leaves happen in most runs.
  assert.ok(snapshots > SWEEP_RUNS * 5, `only ${snapshots} snapshots`);
  assert.ok(leaves > SWEEP_RUNS / 4, `only ${leaves} leaves`);
  // fleetTokenLimit judges something: the token-limited tenant (half the
  // scenarios) reaches its limit in most of them.
  assert.ok(
    tokenReaches > SWEEP_RUNS / 4,
    `only ${tokenReaches} token limits reached`,
  );
});

for (const fault of CLUSTER_FAULTS) {
  Deno.test(`cluster scenario: three instances, fault "${fault}" alone, seeds 1-10 hold every fleet invariant`, () => {
    let reached = 0;
    for (let seed = 1n; seed <= 10n; seed++) {
      const run = runCluster(threeByThree(seed, 50, [fault]));
      assert.equal(run.violations.length, 0, report(seed, run));
      assert.ok(run.stats.ended > 20);
      reached += run.stats.tokenLimitReached;
    }
    // Tenant "a"'s token limit is reached, so fleetTokenLimit was put to work.
    assert.ok(reached >= 5, `token limit reached in only ${reached} runs`);
  });
}

// Each mutant (sim/mutants.ts) must trip its invariant: proof that it can fail.
Deno.test("every cluster mutant has an expected catcher", () => {
  assert.deepEqual(
    CLUSTER_MUTANT_SPECS.map((m) => m.name).sort(),
    [...CLUSTER_MUTANTS].sort(),
  );
});

for (const m of CLUSTER_MUTANT_SPECS) {
  Deno.test(`cluster mutant "${m.name}" (breaks: ${m.breaks}) is caught by ${m.caughtBy} within 20 seeds`, () => {
    for (let seed = 1n; seed <= 20n; seed++) {
      const run = runCluster(
        m.drawn === true ? clusterScenario(seed) : {
          ...threeByThree(seed, 60, m.faults ?? [...CLUSTER_FAULTS]),
          slowReader: seed % 2n === 0n,
        },
        m.name,
      );
      if (run.violations.some((v) => v.invariant === m.caughtBy)) return;
    }
    assert.fail(`mutant ${m.name} survived 20 seeds`);
  });
}

Deno.test("fleetTokenLimit holds for the real code on the 20 seeds that catch tokensPerInstance, the limit reached in most", () => {
  let reached = 0;
  for (let seed = 1n; seed <= 20n; seed++) {
    const run = runCluster(threeByThree(seed, 60, [...CLUSTER_FAULTS]));
    const broken = run.violations.filter((v) =>
      v.invariant === "fleetTokenLimit"
    );
    assert.deepEqual(broken, [], `seed ${seed}`);
    reached += run.stats.tokenLimitReached;
  }
  assert.ok(reached >= 10, `token limit reached in only ${reached} runs`);
});

Deno.test("cluster runs are deterministic: one seed, one outcome", () => {
  const s = clusterScenario(7n);
  assert.deepEqual(runCluster(s), runCluster(s));
});
