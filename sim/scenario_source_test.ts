// The printed builder calls give back the very scenario: evaluated with the
// builders in scope, the text is deep-equal to what was printed (so a pasted
// regression replays the same run).
import assert from "node:assert/strict";
import fc from "fast-check";
import { scenarioArb } from "./arbitrary.ts";
import {
  backendPlan,
  client,
  lifecycle,
  load,
  operators,
  type Scenario,
  scenario,
  swept,
  sweptBackend,
  sweptLifecycle,
  sweptOperators,
  sweptWorker,
} from "./scenario.ts";
import { runScenario, simConfig } from "./run_scenario.ts";
import { scenarioSource } from "./scenario_source.ts";
import { REGRESSIONS, SCENARIOS } from "./scenarios/mod.ts";

const BUILDERS = {
  backendPlan,
  client,
  lifecycle,
  load,
  operators,
  swept,
  sweptBackend,
  sweptLifecycle,
  sweptOperators,
  sweptWorker,
};

function evaluate(source: string): unknown {
  const body = source.replace(/^const regression: Scenario = /, "return ");
  const make = new Function(...Object.keys(BUILDERS), body);
  return make(...Object.values(BUILDERS));
}

/** The printed text rebuilds the scenario, and its configuration as it runs. */
function roundTrips(s: Scenario): Scenario {
  // A plain copy: fast-check builds its records without a prototype.
  const plain = structuredClone(s);
  const back = evaluate(scenarioSource(s, "regression")) as Scenario;
  assert.deepStrictEqual({ ...back, config: {} }, { ...plain, config: {} });
  assert.deepStrictEqual(simConfig(back), simConfig(plain));
  return back;
}

Deno.test("named scenarios and pinned regressions print as builder calls that rebuild them and replay the same run", () => {
  for (const s of SCENARIOS.values()) {
    const back = roundTrips(s);
    assert.equal(runScenario(back, 1n).hash, runScenario(s, 1n).hash, s.name);
  }
  for (const r of REGRESSIONS) {
    const back = roundTrips(r.scenario);
    assert.equal(
      runScenario(back, r.seed).hash,
      runScenario(r.scenario, r.seed).hash,
      r.scenario.name,
    );
  }
});

Deno.test("a scenario on the sweep's floor prints as one call, and what differs from it is all that is printed", () => {
  assert.equal(
    scenarioSource(swept({ name: "quiet" }), "regression"),
    'const regression: Scenario = swept({\n  name: "quiet",\n});',
  );
  const s = swept({
    name: "busy",
    tickMs: 250,
    config: { queueLenMax: 1, queueTimeoutMs: 900 },
    workers: [sweptWorker("w0", ["m1"], { chunks: [1, 2] })],
    clients: [client(0, "m1")],
  });
  assert.equal(
    scenarioSource(s, "regression"),
    [
      "const regression: Scenario = swept({",
      '  name: "busy",',
      "  tickMs: 250,",
      "  config: { queueTimeoutMs: 900 },",
      "  workers: [",
      '    sweptWorker("w0", ["m1"], { chunks: [1, 2] }),',
      "  ],",
      "  clients: [",
      '    client(0, "m1"),',
      "  ],",
      "});",
    ].join("\n"),
  );
  // A hand-written scenario prints against the same floor: its calmer
  // configuration is what differs.
  const calm = scenarioSource(scenario({ name: "calm" }), "regression");
  assert.match(calm, /queueTimeoutMs: 3000/);
});

Deno.test("random scenarios print as builder calls that rebuild them", () => {
  fc.assert(
    fc.property(scenarioArb(), (s) => {
      roundTrips(s);
    }),
    { seed: 17, numRuns: 300 },
  );
});

Deno.test("the arbitrary's floor is the printer's: a random scenario shrunk all the way prints no configuration and bare workers", () => {
  const details = fc.check(fc.property(scenarioArb(), () => false), {
    seed: 34,
    numRuns: 1,
  });
  const shrunk = details.counterexample![0] as Scenario;
  const source = scenarioSource(shrunk, "regression");
  assert.doesNotMatch(source, /config:/);
  assert.match(source, /sweptWorker\("w0", \["m\d"\]\),/);
  assert.ok(source.split("\n").length <= 8, source);
});
