// The models simulator (issue 30): the real core keeps every models invariant
// on every named scenario, with workers that report residency and with
// workers that do not; each invariant can fail (its mutant is caught); runs
// replay from their seed.
import assert from "node:assert/strict";
import { MODELS_MUTANTS } from "./mutants.ts";
import { MODELS_SCENARIOS, randomScenario } from "./scenarios.ts";
import { type ModelsInvariant, runModels } from "./world.ts";

const SEEDS = [1n, 2n, 3n, 4n, 5n];

for (const s of MODELS_SCENARIOS.values()) {
  Deno.test(`models scenario ${s.name}: the real core keeps every invariant (seeds 1-5, both policies)`, () => {
    for (const seed of SEEDS) {
      for (const policy of ["new", "today"] as const) {
        const r = runModels(s, seed, policy);
        assert.equal(
          r.violation,
          null,
          `seed ${seed} ${policy}: ${r.violation?.name} ${r.violation?.message}`,
        );
        assert.equal(r.completed + r.failed + r.aborted, r.requests);
      }
    }
  });
}

Deno.test("every models invariant has its own mutant", () => {
  const invariants: ModelsInvariant[] = [
    "hotFirst",
    "noEvictionUnderDemand",
    "noLoadWithoutDemand",
    "everyRequestEnds",
  ];
  assert.deepEqual(
    MODELS_MUTANTS.map((m) => m.caughtBy).sort(),
    [...invariants].sort(),
  );
});

for (const m of MODELS_MUTANTS) {
  Deno.test(`models mutant ${m.name} (breaks: ${m.breaks}) is caught by ${m.caughtBy} on ${m.scenario}, every seed 1-5`, () => {
    const s = MODELS_SCENARIOS.get(m.scenario)!;
    for (const seed of SEEDS) {
      const r = runModels(s, seed, "new", m.make());
      assert.equal(
        r.violation?.name,
        m.caughtBy,
        `seed ${seed}: ${r.violation?.name} ${r.violation?.message}`,
      );
    }
  });
}

Deno.test("two boxes with overlapping models and room for one: two loads in all, where today's routing swaps again and again", () => {
  const s = MODELS_SCENARIOS.get("two_boxes_overlapping")!;
  for (const seed of SEEDS) {
    const hot = runModels(s, seed, "new");
    const today = runModels(s, seed, "today");
    assert.equal(hot.loads, 2, `seed ${seed}`);
    assert.ok(today.loads > 10 * hot.loads, `seed ${seed}: ${today.loads}`);
  }
});

Deno.test("hot boxes whose backends refuse one request in ten: every refused request ends, with no load", () => {
  // The old rule waited for the other box, which lists the model but would
  // never load it while its holder was free: everyRequestEnds failed on
  // every seed (found by e2e/models_fleet_test.ts with two real routers).
  const s = MODELS_SCENARIOS.get("hot_worker_refuses")!;
  for (const seed of SEEDS) {
    const r = runModels(s, seed, "new");
    assert.equal(r.violation, null, `seed ${seed}: ${r.violation?.message}`);
    assert.equal(r.completed, r.requests, `seed ${seed}`);
    assert.equal(r.loads, 0, `seed ${seed}`);
  }
});

Deno.test("a models run replays from its seed", () => {
  for (const s of MODELS_SCENARIOS.values()) {
    const a = runModels(s, 7n, "new");
    const b = runModels(s, 7n, "new");
    assert.deepEqual(a, b);
  }
});

Deno.test("random fleets 1-200 (boxes, rooms, models, deaths, drains, refusals, impatient clients) keep every models invariant, both policies", () => {
  for (let seed = 1n; seed <= 200n; seed++) {
    for (const policy of ["new", "today"] as const) {
      const r = runModels(randomScenario(seed), seed, policy);
      assert.equal(
        r.violation,
        null,
        `random fleet ${seed} ${policy}: ${r.violation?.name} ${r.violation?.message}`,
      );
    }
  }
});
