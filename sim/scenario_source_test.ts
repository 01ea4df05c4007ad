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
  worker,
} from "./scenario.ts";
import { scenarioSource } from "./scenario_source.ts";
import { REGRESSIONS, SCENARIOS } from "./scenarios/mod.ts";

const BUILDERS = { backendPlan, client, lifecycle, load, operators, worker };

function evaluate(source: string): unknown {
  const body = source.replace(/^const regression: Scenario = /, "return ");
  const make = new Function(...Object.keys(BUILDERS), body);
  return make(...Object.values(BUILDERS));
}

function roundTrips(s: Scenario): void {
  // A plain copy: fast-check builds its records without a prototype.
  const plain = structuredClone(s);
  assert.deepStrictEqual(evaluate(scenarioSource(s, "regression")), plain);
}

Deno.test("named scenarios and pinned regressions print as builder calls that rebuild them", () => {
  for (const s of SCENARIOS.values()) roundTrips(s);
  for (const r of REGRESSIONS) roundTrips(r.scenario);
});

Deno.test("random scenarios print as builder calls that rebuild them", () => {
  fc.assert(
    fc.property(scenarioArb(), (s) => roundTrips(s)),
    { seed: 17, numRuns: 300 },
  );
});
