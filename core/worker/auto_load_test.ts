// Issue 30: AUTO_LOAD in the worker core (auto_load.ts).
import assert from "node:assert/strict";
import {
  type BackendResidency,
  step,
  type WorkerAction,
  type WorkerState,
} from "./mod.ts";
import {
  backendFinished,
  frame,
  registeredWith,
  requestFrame,
} from "./_testing.ts";

/** A router started with --no-models-autoload and --models-max 1. */
const router = (loaded: string[]): BackendResidency => ({
  loaded,
  loading: [],
  room: 1,
  swaps: true,
  explicitLoad: true,
});

function worker(
  read: BackendResidency,
  autoLoad = true,
  maxConcurrent = 4,
): WorkerState {
  const s = registeredWith(["residency-v1"], { autoLoad, maxConcurrent });
  step(s, { atMs: 0, kind: "residencyRead", residency: read });
  return s;
}

function request(s: WorkerState, id: string, model: string): WorkerAction[] {
  return step(s, requestFrame(id, { model, headers: {} }));
}

const of = <K extends WorkerAction["kind"]>(actions: WorkerAction[], kind: K) =>
  actions.filter((a): a is Extract<WorkerAction, { kind: K }> =>
    a.kind === kind
  );
const forwarded = (actions: WorkerAction[]) =>
  of(actions, "forward").map((a) => a.request.request_id);

function done(s: WorkerState, model: string, error: string | null = null) {
  return step(s, { atMs: 0, kind: "autoLoadDone", model, error });
}

Deno.test("AUTO_LOAD: a request for a model the router must load waits for one load, then all waiting go", () => {
  const s = worker(router([]));
  const first = request(s, "r1", "a");
  assert.deepEqual(of(first, "autoLoad"), [{
    kind: "autoLoad",
    model: "a",
    evict: null,
  }]);
  assert.deepEqual(forwarded(first), []);
  const second = request(s, "r2", "a");
  assert.deepEqual(of(second, "autoLoad"), [], "one load per model");
  assert.equal(s.inFlight.size, 2, "waiting requests count as load");
  const loaded = done(s, "a");
  assert.deepEqual(forwarded(loaded), ["r1", "r2"]);
  assert.equal(of(loaded, "probeResidency").length, 1);
  // Now held: the next one goes at once.
  assert.deepEqual(forwarded(request(s, "r3", "a")), ["r3"]);
});

Deno.test("AUTO_LOAD: no room, so the least recently served idle model is unloaded first", () => {
  const s = worker({ ...router(["a", "b"]), room: 2 });
  // b served after a: a is the least recently used.
  for (const [id, model] of [["x1", "a"], ["x2", "b"]]) {
    request(s, id!, model!);
    step(s, backendFinished(id!, "{}"));
  }
  assert.deepEqual(of(request(s, "r1", "c"), "autoLoad"), [{
    kind: "autoLoad",
    model: "c",
    evict: "a",
  }]);
});

Deno.test("AUTO_LOAD: a model with a request in flight is never the one unloaded", () => {
  const s = worker(router(["a"]));
  assert.deepEqual(forwarded(request(s, "busy", "a")), ["busy"]);
  assert.deepEqual(of(request(s, "r1", "b"), "autoLoad"), [{
    kind: "autoLoad",
    model: "b",
    evict: null,
  }]);
});

Deno.test("AUTO_LOAD: a failed load answers each waiting request backend_unavailable (the server sends it elsewhere)", () => {
  const s = worker(router([]));
  request(s, "r1", "a");
  request(s, "r2", "a");
  const failed = done(s, "a", "backend answered 404: no such model");
  const errors = of(failed, "send").map((a) => a.message);
  assert.equal(errors.length, 2);
  for (const e of errors) {
    assert.equal(e.type, "error");
  }
  assert.equal(s.inFlight.size, 0);
});

Deno.test("AUTO_LOAD: a request cancelled while its model loads is not forwarded", () => {
  const s = worker(router([]));
  request(s, "r1", "a");
  request(s, "r2", "a");
  step(
    s,
    frame({ type: "cancel", request_id: "r1", reason: "client_disconnect" }),
  );
  assert.deepEqual(forwarded(done(s, "a")), ["r2"]);
});

Deno.test("AUTO_LOAD off, or a backend that loads on its own first request: forwarded as is", () => {
  assert.deepEqual(forwarded(request(worker(router([]), false), "r1", "a")), [
    "r1",
  ]);
  const ollama = worker({ loaded: [], loading: [], room: null, swaps: true });
  assert.deepEqual(forwarded(request(ollama, "r1", "a")), ["r1"]);
});
