import assert from "node:assert/strict";
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
