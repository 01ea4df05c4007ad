import assert from "node:assert/strict";
import fc from "fast-check";
import { scenarioArb } from "./arbitrary.ts";
import { runScenario } from "./run_scenario.ts";
import { SCENARIOS } from "./scenarios/mod.ts";
import { sweep } from "./sweep.ts";

Deno.test("same seed, same trace hash; another seed, another hash (named scenarios)", () => {
  for (const [name, s] of SCENARIOS) {
    const a = runScenario(s, 42n);
    const b = runScenario(s, 42n);
    const c = runScenario(s, 43n);
    assert.equal(a.hash, b.hash, name);
    assert.equal(a.events, b.events, name);
    assert.notEqual(a.hash, c.hash, name);
  }
});

Deno.test("a 40-hex git SHA works as a seed and is reproducible", () => {
  const s = SCENARIOS.get("crash_storm")!;
  const sha = BigInt("0x1a83242" + "0".repeat(33));
  assert.equal(runScenario(s, sha).hash, runScenario(s, sha).hash);
  assert.notEqual(runScenario(s, sha).hash, runScenario(s, sha + 1n).hash);
});

Deno.test("the sweep is reproducible from its seed", () => {
  const a = sweep({ seed: 5n, runs: 50 });
  const b = sweep({ seed: 5n, runs: 50 });
  const c = sweep({ seed: 6n, runs: 50 });
  assert.equal(a.hash, b.hash);
  assert.deepEqual(a.stats, b.stats);
  assert.notEqual(a.hash, c.hash);
});

Deno.test("property: a random scenario replays to the same trace hash", () => {
  const out = fc.check(
    fc.property(scenarioArb(), fc.nat(), (s, seed) => {
      return runScenario(s, BigInt(seed)).hash ===
        runScenario(s, BigInt(seed)).hash;
    }),
    { seed: 11, numRuns: 60 },
  );
  assert.equal(
    out.failed,
    false,
    `counterexample path ${out.counterexamplePath}`,
  );
});
