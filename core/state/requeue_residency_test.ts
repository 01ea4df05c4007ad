// Issue 30 with issue 14: a request a worker sent back (backend_unavailable)
// avoids that worker; when it was the only one holding the model, the request
// must not wait for it forever. Found by e2e/models_fleet_test.ts with two
// real llama-server routers (a router hung up; the request timed out queued).
import assert from "node:assert/strict";
import {
  addRequest,
  addWorker,
  complete,
  dispatched,
  newState,
  step,
  tick,
} from "../_testing.ts";
import type { Effect } from "../effect.ts";
import { EXTENSION_RESIDENCY } from "../protocol/messages.ts";
import type { State } from "./state.ts";

/** w1 holds a, w2 holds b, room 1 each; r1 (a) went to w1, which sent it back. */
function sentBack(): State {
  const s = newState({ queueTimeoutMs: 30_000 });
  for (const id of ["w1", "w2"]) {
    addWorker(s, id, {
      models: ["a", "b"],
      maxConcurrent: 4,
      extensions: [EXTENSION_RESIDENCY],
    });
  }
  for (const [id, model] of [["w1", "a"], ["w2", "b"]] as const) {
    step(s, {
      kind: "residencyReceived",
      atMs: 0,
      workerId: id,
      loaded: [model],
      loading: [],
      room: 1,
    });
  }
  assert.deepEqual(dispatched(addRequest(s, "r1", { model: "a", atMs: 10 })), [
    ["r1", "w1"],
  ]);
  return s;
}

function backendUnavailable(s: State, atMs: number): Effect[] {
  return step(s, {
    kind: "workerErrorReceived",
    atMs,
    workerId: "w1",
    requestId: "r1",
    code: "backend_unavailable",
    message: "socket hang up",
  });
}

Deno.test("a request its only holder sent back loads on the other worker once that one's model is idle, never waiting for the avoided one", () => {
  const s = sentBack();
  addRequest(s, "rb", { model: "b", atMs: 20 }); // w2's model is busy
  assert.deepEqual(dispatched(backendUnavailable(s, 100)), []);
  let to: string | null = null;
  for (let t = 200; t <= 10_000 && to === null; t += 100) {
    const effects = t === 2_000
      ? complete(s, "w2", "rb", { atMs: t }) // w2's model idle: the queue moves
      : tick(s, t);
    const d = dispatched(effects);
    if (d.length > 0) to = d[0]![1];
  }
  assert.equal(to, "w2");
  assert.equal(s.requests.get("r1")?.status.kind, "dispatched");
});

Deno.test("a request its only holder sent back goes to an idle other worker at once", () => {
  const s = sentBack();
  assert.deepEqual(dispatched(backendUnavailable(s, 100)), [["r1", "w2"]]);
});
