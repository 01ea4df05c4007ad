import assert from "node:assert/strict";
import { addWorker, newState, reportResidency, step } from "../_testing.ts";
import { EXTENSION_RESIDENCY } from "../protocol/messages.ts";
import { workerViews } from "../queries.ts";
import { modelById, modelList } from "./models.ts";

Deno.test("the model list merges every worker's acked models, each once, wildcard never", () => {
  const state = newState();
  addWorker(state, "w1", { models: ["a", "*"] });
  addWorker(state, "w2", { models: ["b", "a"] });
  const list = modelList(state) as { object: string; data: unknown[] };
  assert.equal(list.object, "list");
  assert.deepEqual(list.data, [
    {
      id: "a",
      object: "model",
      created: 0,
      owned_by: "modelrelay",
      status: "loaded",
    },
    {
      id: "b",
      object: "model",
      created: 0,
      owned_by: "modelrelay",
      status: "loaded",
    },
  ]);
});

Deno.test("issue 30: /v1/models status tells the truth from residency: loaded, loading or available", () => {
  const state = newState();
  for (const id of ["w1", "w2"]) {
    addWorker(state, id, {
      models: ["a", "b", "c"],
      extensions: [EXTENSION_RESIDENCY],
    });
  }
  const report = (workerId: string, loaded: string[], loading: string[]) =>
    step(state, {
      kind: "residencyReceived",
      atMs: 0,
      workerId,
      loaded,
      loading,
      room: 1,
    });
  report("w1", ["a"], []);
  report("w2", [], ["b"]);
  const statuses = () =>
    Object.fromEntries(
      (modelList(state) as { data: { id: string; status: string }[] }).data
        .map((m) => [m.id, m.status]),
    );
  assert.deepEqual(statuses(), { a: "loaded", b: "loading", c: "available" });
  assert.deepEqual(modelById(state, "b"), {
    id: "b",
    object: "model",
    created: 0,
    owned_by: "modelrelay",
    status: "loading",
    progress: 0,
  });
  assert.equal(modelById(state, "c")?.status, "available");
  // An original-dialect worker cannot tell: what it acked counts as loaded.
  addWorker(state, "w3", { models: ["c"] });
  assert.equal(statuses().c, "loaded");
});

Deno.test("issue 30: /admin/workers shows each worker's residency (null without residency-v1)", () => {
  const state = newState();
  addWorker(state, "w1", {
    models: ["a", "b"],
    extensions: [EXTENSION_RESIDENCY],
  });
  addWorker(state, "w2", { models: ["a"] });
  reportResidency(state, "w1", ["b"]);
  const views = workerViews(state);
  assert.deepEqual(views[0]!.residency, {
    room: 1,
    models: { a: "available", b: "loaded" },
  });
  assert.equal(views[1]!.residency, null);
});
