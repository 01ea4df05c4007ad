// The fleet-health view checked against every simulated step: whatever the
// faults, the capabilities document never calls the fleet healthy while no
// worker could take a request. A wrapping reducer looks at the state after each
// event; the run itself (and its trace hash) is the scenario's own.
import assert from "node:assert/strict";
import fc from "fast-check";
import { type Event, fleetHealth, reduce, type State } from "../core/mod.ts";
import { scenarioArb } from "./arbitrary.ts";
import { runScenario } from "./run_scenario.ts";
import type { Scenario } from "./scenario.ts";
import { SCENARIOS } from "./scenarios/mod.ts";

/** The first step whose state the fleet view calls healthy with no worker to serve, or null. */
function healthyWithNothingToServe(s: Scenario, seed: bigint): string | null {
  let found: string | null = null;
  const watched = (state: State, event: Event) => {
    const reduced = reduce(state, event);
    const workers = [...state.workers.values()];
    const canServe = workers.some((w) => !w.draining);
    if (
      found === null && !canServe && fleetHealth(state, workers) === "healthy"
    ) {
      found =
        `${event.kind} at ${event.atMs} ms: ${workers.length} worker(s), all draining`;
    }
    return reduced;
  };
  runScenario(s, seed, { reduce: watched });
  return found;
}

Deno.test("fleet health is never healthy while no worker can serve (named scenarios)", () => {
  for (const [name, s] of SCENARIOS) {
    for (const seed of [1n, 2n, 3n]) {
      assert.equal(
        healthyWithNothingToServe(s, seed),
        null,
        `${name} #${seed}`,
      );
    }
  }
});

Deno.test("property: fleet health is never healthy while no worker can serve", () => {
  fc.assert(
    fc.property(
      scenarioArb(),
      fc.integer(),
      (s, seed) => healthyWithNothingToServe(s, BigInt(seed)) === null,
    ),
    { numRuns: 30 },
  );
});
