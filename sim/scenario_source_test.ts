// The printed builder calls give back the very scenario: evaluated with the
// builders in scope, the text is deep-equal to what was printed (so a pasted
// regression replays the same run).
import assert from "node:assert/strict";
import fc from "fast-check";
import { scenarioArb } from "./arbitrary.ts";
import {
  backendPlan,
  client,
  configOverrides,
  lifecycle,
  load,
  operators,
  type Scenario,
  scenario,
  worker,
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
  scenario,
  worker,
};

function evaluate(source: string): unknown {
  const body = source.replace(/^const regression: Scenario = /, "return ");
  const make = new Function(...Object.keys(BUILDERS), body);
  return make(...Object.values(BUILDERS));
}

/** The printed text rebuilds the scenario, its configuration down to what differs from the defaults. */
function roundTrips(s: Scenario): Scenario {
  // A plain copy: fast-check builds its records without a prototype.
  const plain = structuredClone(s);
  const back = evaluate(scenarioSource(s, "regression")) as Scenario;
  assert.deepStrictEqual(back, {
    ...plain,
    config: configOverrides(plain.config),
  });
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

Deno.test("a scenario with only defaults prints as one call, and what differs is all that is printed", () => {
  assert.equal(
    scenarioSource(scenario({ name: "quiet" }), "regression"),
    'const regression: Scenario = scenario({\n  name: "quiet",\n});',
  );
  const s = scenario({
    name: "busy",
    tickMs: 250,
    config: { queueLenMax: 20, queueTimeoutMs: 900 },
    clients: [client(0, "m1")],
  });
  assert.equal(
    scenarioSource(s, "regression"),
    [
      "const regression: Scenario = scenario({",
      '  name: "busy",',
      "  tickMs: 250,",
      "  config: { queueTimeoutMs: 900 },",
      "  clients: [",
      '    client(0, "m1"),',
      "  ],",
      "});",
    ].join("\n"),
  );
});

Deno.test("random scenarios print as builder calls that rebuild them", () => {
  fc.assert(
    fc.property(scenarioArb(), (s) => {
      roundTrips(s);
    }),
    { seed: 17, numRuns: 300 },
  );
});
