// The cluster data path under seeded faults (issue 23): instances dying at the
// commit point or with pieces on the link, slow links, log outages with streams
// in flight. Every data path invariant holds with the real rules, and each
// mutant of sim/mutants.ts is caught by the invariant named for it.
import assert from "node:assert/strict";
import {
  DATA_PATH_FAULTS,
  type DataPathRun,
  REAL_RULES as REAL,
  runDataPath,
} from "./data_path_world.ts";
import { DATA_PATH_MUTANTS } from "./mutants.ts";

const SEEDS = 60;

function report(seed: bigint, run: DataPathRun): string {
  return run.violations.map((v) => `seed ${seed}: ${v.invariant}: ${v.detail}`)
    .join("\n");
}

for (const fault of DATA_PATH_FAULTS) {
  Deno.test(`data path sim: fault "${fault}", ${SEEDS} seeds: every answer comes from one dispatch, ends whole or with an error, and ends; streams outlive a log outage`, () => {
    let crashes = 0;
    let completed = 0;
    for (let seed = 1n; seed <= BigInt(SEEDS); seed++) {
      const run = runDataPath({ seed, requests: 40, faults: [fault] });
      assert.equal(run.violations.length, 0, report(seed, run));
      crashes += run.stats.crashes;
      completed += run.stats.completed;
    }
    assert.ok(completed > SEEDS * 20, `only ${completed} completed`);
    if (fault.startsWith("crash")) {
      assert.ok(crashes > SEEDS / 2, `only ${crashes} crashes`);
    }
  });
}

Deno.test("data path sim: every fault at once holds every invariant", () => {
  for (let seed = 1n; seed <= BigInt(SEEDS); seed++) {
    const run = runDataPath({
      seed,
      requests: 40,
      faults: [...DATA_PATH_FAULTS],
    });
    assert.equal(run.violations.length, 0, report(seed, run));
  }
});

for (const m of DATA_PATH_MUTANTS) {
  Deno.test(`data path mutant ${m.name} (breaks: ${m.breaks}) is caught by ${m.caughtBy}`, () => {
    for (let seed = 1n; seed <= 200n; seed++) {
      for (const fault of DATA_PATH_FAULTS) {
        const run = runDataPath(
          { seed, requests: 40, faults: [fault] },
          { ...REAL, ...m.rules },
        );
        if (run.violations.some((v) => v.invariant === m.caughtBy)) return;
      }
    }
    assert.fail(`${m.name} survived 200 seeds`);
  });
}

Deno.test("data path runs are deterministic: one seed, one outcome", () => {
  const s = { seed: 7n, requests: 40, faults: [...DATA_PATH_FAULTS] };
  assert.deepEqual(runDataPath(s), runDataPath(s));
});
