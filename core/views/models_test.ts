import assert from "node:assert/strict";
import { addWorker, newState } from "../_testing.ts";
import { modelList } from "./models.ts";

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
