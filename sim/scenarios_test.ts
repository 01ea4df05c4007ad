import assert from "node:assert/strict";
import { runScenario } from "./run_scenario.ts";
import { REGRESSIONS, SCENARIOS } from "./scenarios/mod.ts";

const NAMES = [
  "steady_load",
  "worker_churn",
  "crash_storm",
  "heartbeat_loss",
  "mass_client_abort",
  "drain_during_load",
  "queue_overflow",
  "model_update_race",
  "hostile_worker",
];

Deno.test("every named scenario from the issue is registered", () => {
  assert.deepEqual([...SCENARIOS.keys()].sort(), [...NAMES].sort());
});

for (const [name, scenario] of SCENARIOS) {
  Deno.test(`scenario ${name} holds every invariant (seeds 1-5)`, () => {
    for (let seed = 1n; seed <= 5n; seed++) {
      const r = runScenario(scenario, seed);
      assert.equal(
        r.violation,
        null,
        `${name} seed ${seed}: ${r.violation?.name} ${r.violation?.message} at ${r.failingEvent}`,
      );
      assert.ok(
        r.events > 100,
        `${name} seed ${seed} ran only ${r.events} events`,
      );
    }
  });
}

for (const reg of REGRESSIONS) {
  Deno.test(`regression ${reg.scenario.name}: ${reg.postmortem}`, () => {
    const r = runScenario(reg.scenario, reg.seed);
    assert.equal(
      r.violation,
      null,
      `${r.violation?.name} ${r.violation?.message}`,
    );
  });
}
