import assert from "node:assert/strict";
import { addWorker, newState } from "../_testing.ts";
import { VERSION } from "../version.ts";
import { capabilitiesView } from "./capabilities.ts";

const WAITS = { avgWaitMs: 7, p95WaitMs: 20 };

Deno.test("the fleet's capabilities name the relay, its queue and the acked models", () => {
  const state = newState({ queueLenMax: 50 });
  addWorker(state, "w1", { models: ["a", "b"] });
  addWorker(state, "w2", { models: ["b"] });
  const view = capabilitiesView(state, WAITS, null)!;
  assert.equal(view.runnerType, `modelrelay-${VERSION}`);
  assert.equal(view.runnerId, "modelrelay");
  assert.deepEqual(view.queue, {
    depth: 0,
    maxDepth: 50,
    avgWaitMs: 7,
    p95WaitMs: 20,
  });
  const models = view.models as { loaded: { id: string; workers: string[] }[] };
  assert.deepEqual(models.loaded.map((m) => [m.id, m.workers]), [
    ["a", ["w1"]],
    ["b", ["w1", "w2"]],
  ]);
  assert.equal(view.health, "healthy");
  assert.equal((view.workers as unknown[]).length, 2);
});

Deno.test("without detail the capabilities describe the fleet only: no worker ids", () => {
  const state = newState();
  addWorker(state, "w1", { models: ["a"] });
  const view = capabilitiesView(state, WAITS, null, false)!;
  assert.equal("workers" in view, false);
  const models = view.models as { loaded: Record<string, unknown>[] };
  assert.deepEqual(models.loaded, [{ id: "a" }]);
});

Deno.test("one worker's capabilities; null for a worker that is not connected", () => {
  const state = newState();
  addWorker(state, "w1", { models: ["a"] });
  addWorker(state, "w2", { models: ["b"] });
  const view = capabilitiesView(state, WAITS, "w2")!;
  assert.equal(view.runnerId, "w2");
  assert.deepEqual(
    (view.models as { loaded: { id: string }[] }).loaded.map((m) => m.id),
    ["b"],
  );
  assert.equal(capabilitiesView(state, WAITS, "nobody"), null);
});
