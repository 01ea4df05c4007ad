import assert from "node:assert/strict";
import type { Event } from "./event.ts";
import {
  actions,
  addRequest,
  addWorker,
  chunk,
  clientGone,
  complete,
  dispatched,
  drainRequested,
  logs,
  modelsUpdate,
  newState,
  ofKind,
  only,
  pong,
  queued,
  routed,
  sent,
  statusOf,
  step,
  tick,
  worker,
} from "../_testing.ts";

function drain(workerId: string, atMs = 0): Event {
  return drainRequested(workerId, "maintenance", atMs);
}

// ---- C28: worker drain -----------------------------------------------------------------

Deno.test("C28 drain sends graceful_shutdown and the worker receives no new work", () => {
  const state = newState({ drainTimeoutMs: 30_000 });
  addWorker(state, "w1", { maxConcurrent: 4 });
  addRequest(state, "r1");
  const effects = step(state, drain("w1", 10));
  assert.deepEqual(sent(effects, "graceful_shutdown", "w1"), [
    {
      type: "graceful_shutdown",
      reason: "maintenance",
      drain_timeout_secs: 30,
      to: "w1",
    },
  ]);
  assert.equal(logs(effects, "graceful shutdown").length, 1);
  assert.equal(ofKind(effects, "closeWorker").length, 0); // r1 still in flight
  const w = worker(state, "w1");
  assert.equal(w.draining, true);
  assert.equal(w.drainDeadlineAtMs, 30_010);
  // New work for its model queues instead of going to it (it still "knows" the model: no 404).
  const next = addRequest(state, "r2");
  assert.deepEqual(dispatched(next), []);
  assert.equal(statusOf(state, "r2"), "queued");
  // A second drain request changes nothing.
  assert.deepEqual(step(state, drain("w1", 11)), []);
});

Deno.test("C28 in-flight requests finish, then the idle worker is closed with 1000", () => {
  const state = newState();
  addWorker(state, "w1", { maxConcurrent: 4 });
  addRequest(state, "r1", { stream: true });
  addRequest(state, "r2");
  step(state, drain("w1"));
  chunk(state, "w1", "r1", "data: 1\n\n");
  const first = complete(state, "w1", "r2", { body: "ok" });
  assert.equal(only(first, "respond").body, "ok");
  assert.equal(ofKind(first, "closeWorker").length, 0);
  const last = complete(state, "w1", "r1");
  assert.equal(only(last, "endStream").error, null);
  assert.deepEqual(only(last, "closeWorker"), {
    kind: "closeWorker",
    workerId: "w1",
    code: 1000,
    reason: "worker drained",
  });
  // The close comes after the last answer.
  const kinds = actions(last).map((e) => e.kind);
  assert.ok(kinds.indexOf("endStream") < kinds.indexOf("closeWorker"));
  assert.equal(state.workers.size, 0);
  assert.equal(state.requests.size, 0);
});

Deno.test("C28 an idle worker is closed at once when drained", () => {
  const state = newState();
  addWorker(state, "w1");
  const effects = step(state, drain("w1"));
  const kinds = actions(effects).map((e) =>
    e.kind === "sendToWorker" ? e.message.type : e.kind
  );
  assert.deepEqual(kinds, ["graceful_shutdown", "closeWorker"]);
  assert.equal(only(effects, "closeWorker").code, 1000);
  assert.equal(state.workers.size, 0);
});

Deno.test("C28 a draining worker whose last request is cancelled by its client is closed", () => {
  const state = newState();
  addWorker(state, "w1");
  addRequest(state, "r1");
  step(state, drain("w1"));
  const effects = clientGone(state, "r1");
  assert.equal(sent(effects, "cancel", "w1").length, 1);
  assert.equal(only(effects, "closeWorker").code, 1000);
  assert.equal(state.workers.size, 0);
});

Deno.test("C28 a draining worker whose last request times out is closed", () => {
  const state = newState({ requestTimeoutMs: 10_000, drainTimeoutMs: 60_000 });
  addWorker(state, "w1", { atMs: 0 });
  addRequest(state, "r1", { atMs: 0 });
  step(state, drain("w1", 0));
  pong(state, "w1", 1, 9_000);
  const effects = tick(state, 10_000);
  const kinds = actions(effects).map((e) =>
    e.kind === "sendToWorker" ? e.message.type : e.kind
  );
  assert.deepEqual(kinds, [
    "cancel",
    "respondError",
    "requestFinished",
    "closeWorker",
  ]);
  assert.equal(only(effects, "closeWorker").reason, "worker drained");
  assert.equal(state.workers.size, 0);
});

Deno.test("C28 at the drain timeout the worker is closed with 1000 and its requests requeued", () => {
  // The queue clock starts at arrival (C22, issue 14.8): give it room past 30 s.
  const state = newState({ drainTimeoutMs: 30_000, queueTimeoutMs: 60_000 });
  addWorker(state, "w1", { atMs: 0 });
  addRequest(state, "r1", { atMs: 0 });
  step(state, drain("w1", 0));
  pong(state, "w1", 1, 29_000);
  assert.equal(ofKind(tick(state, 29_999), "closeWorker").length, 0);
  const effects = tick(state, 30_000);
  const close = only(effects, "closeWorker");
  assert.equal(close.code, 1000);
  assert.match(close.reason, /drain timeout/);
  assert.equal(state.workers.size, 0);
  assert.equal(statusOf(state, "r1"), "queued");
  assert.equal(state.requests.get("r1")?.requeueCount, 1);
});

// ---- C26: models_update / models_refresh ------------------------------------------------

Deno.test("C26 models_update: routing follows the new acked set", () => {
  // No grace (MODEL_GRACE_SECS=0): a withdrawn model is unknown at once.
  const state = newState({ modelGraceMs: 0 });
  addWorker(state, "w1", { models: ["a"] });
  const effects = step(
    state,
    modelsUpdate("w1", [" b ", "b", ""], { atMs: 1, currentLoad: 2 }),
  );
  assert.deepEqual(actions(effects), []);
  assert.equal(logs(effects, "worker models updated").length, 1);
  const w = worker(state, "w1");
  assert.deepEqual(w.models, ["b"]);
  assert.equal(w.reportedLoad, 2);
  assert.equal(state.modelIndex.get("local")?.has("a"), false);
  assert.deepEqual(state.modelIndex.get("local")?.get("b"), new Set(["w1"]));
  assert.equal(
    only(addRequest(state, "ra", { model: "a" }), "respondError").error.status,
    404,
  );
  assert.deepEqual(routed(state, "rb", { model: "b" }), [["rb", "w1"]]);
});

Deno.test("C26 a request in flight on a removed model finishes normally", () => {
  const state = newState();
  addWorker(state, "w1", { models: ["a"] });
  addRequest(state, "r1", { model: "a", stream: true });
  chunk(state, "w1", "r1", "data: 1\n\n");
  step(state, modelsUpdate("w1", ["b"], { atMs: 1 }));
  assert.equal(statusOf(state, "r1"), "streaming");
  assert.equal(
    ofKind(chunk(state, "w1", "r1", "data: 2\n\n"), "writeChunk")[0]?.chunk,
    "data: 2\n\n",
  );
  const end = complete(state, "w1", "r1");
  assert.equal(only(end, "endStream").error, null);
  assert.equal(only(end, "requestFinished").outcome, "completed");
  assert.equal(worker(state, "w1").inFlight.size, 0);
});

Deno.test("C26 models_update to * and models_refresh to one or all workers", () => {
  const state = newState();
  addWorker(state, "w1", { models: ["a"] });
  addWorker(state, "w2", { models: ["a"] });
  step(state, modelsUpdate("w1", ["*"], { atMs: 1 }));
  assert.equal(worker(state, "w1").wildcard, true);
  assert.ok(state.wildcardIndex.get("local")?.has("w1"));
  assert.deepEqual(routed(state, "r1", { model: "zzz" }), [["r1", "w1"]]);
  const one = step(state, {
    kind: "modelsRefreshRequested",
    atMs: 2,
    workerId: "w2",
    reason: "new weights",
  });
  assert.deepEqual(actions(one), [
    {
      kind: "sendToWorker",
      workerId: "w2",
      message: { type: "models_refresh", reason: "new weights" },
    },
  ]);
  const all = step(state, {
    kind: "modelsRefreshRequested",
    atMs: 2,
    workerId: null,
    reason: "r",
  });
  assert.deepEqual(sent(all, "models_refresh").map((m) => m.to), ["w1", "w2"]);
});

// ---- C30: server shutdown ----------------------------------------------------------------

Deno.test("C30 shutdown: queued requests fail 503, workers get graceful_shutdown, new requests get 503", () => {
  const state = newState({ retryAfterSecs: 2 });
  addWorker(state, "w1", { maxConcurrent: 1 });
  addWorker(state, "w2", { maxConcurrent: 1, models: ["other"] });
  addRequest(state, "r1");
  addRequest(state, "r2"); // queued
  const effects = step(state, { kind: "shutdownRequested", atMs: 10 });
  const err = only(effects, "respondError");
  assert.equal(err.requestId, "r2");
  assert.equal(err.error.status, 503);
  assert.equal(err.error.code, "shutting_down");
  assert.equal(err.error.retryAfterSecs, 2);
  assert.deepEqual(sent(effects, "graceful_shutdown").map((m) => m.to), [
    "w1",
    "w2",
  ]);
  // w2 was idle: closed at once; w1 keeps r1 until it finishes.
  assert.deepEqual(ofKind(effects, "closeWorker").map((c) => c.workerId), [
    "w2",
  ]);
  assert.equal(ofKind(effects, "shutdownComplete").length, 0);
  assert.equal(state.shuttingDown, true);
  assert.deepEqual(queued(state), []);
  assert.equal(statusOf(state, "r1"), "dispatched");
  assert.equal(worker(state, "w1").draining, true);
  const late = addRequest(state, "r3");
  assert.equal(only(late, "respondError").error.status, 503);
  assert.equal(only(late, "respondError").error.retryAfterSecs, 2);
  assert.equal(state.requests.has("r3"), false);
  // New worker connections are refused while shutting down.
  const conn = step(state, {
    kind: "workerConnectAttempted",
    atMs: 11,
    workerId: "w3",
    provider: "local",
    clientIp: "1.1.1.1",
    secretValid: true,
  });
  assert.equal(only(conn, "rejectWorker").workerId, "w3");
  assert.equal(state.pending.size, 0);
});

Deno.test("C30 shutdownComplete is emitted once, when the last request ends and the last worker closes", () => {
  const state = newState();
  addWorker(state, "w1");
  addRequest(state, "r1");
  step(state, { kind: "shutdownRequested", atMs: 1 });
  const effects = complete(state, "w1", "r1", { body: "bye" });
  const kinds = actions(effects).map((e) => e.kind);
  assert.deepEqual(kinds, [
    "respond",
    "requestFinished",
    "closeWorker",
    "shutdownComplete",
  ]);
  assert.equal(state.shutdownCompleted, true);
  assert.deepEqual(tick(state, 2), []);
  assert.deepEqual(step(state, { kind: "shutdownRequested", atMs: 3 }), []);
});

Deno.test("C30 shutdown with nothing running completes at once", () => {
  const state = newState();
  const effects = step(state, { kind: "shutdownRequested", atMs: 0 });
  assert.deepEqual(actions(effects), [{ kind: "shutdownComplete" }]);
  assert.equal(state.shutdownCompleted, true);
});

Deno.test("C30 at the drain timeout remaining requests fail 503 and every worker is closed", () => {
  const state = newState({
    drainTimeoutMs: 30_000,
    heartbeatTimeoutMs: 1_000_000,
  });
  addWorker(state, "w1");
  addRequest(state, "r1", { stream: true });
  addRequest(state, "r2");
  chunk(state, "w1", "r1", "data: 1\n\n");
  step(state, { kind: "shutdownRequested", atMs: 0 });
  assert.equal(ofKind(tick(state, 29_999), "shutdownComplete").length, 0);
  const effects = tick(state, 30_000);
  // The started stream ends with an SSE error event (status is not visible to the client).
  const end = only(effects, "endStream");
  assert.equal(end.requestId, "r1");
  assert.equal(end.error?.code, "shutting_down");
  // C21: the workers still holding them hear why.
  const reasons = sent(effects, "cancel").map((c) => c.reason);
  assert.deepEqual(reasons, ["server_shutdown", "server_shutdown"]);
  const err = only(effects, "respondError");
  assert.equal(err.requestId, "r2");
  assert.equal(err.error.status, 503);
  assert.equal(err.error.code, "shutting_down");
  assert.equal(err.error.retryAfterSecs, 1);
  assert.equal(only(effects, "closeWorker").workerId, "w1");
  assert.equal(only(effects, "shutdownComplete").kind, "shutdownComplete");
  assert.equal(state.requests.size, 0);
  assert.equal(state.workers.size, 0);
});

Deno.test("C30 a worker lost during shutdown fails its requests 503 instead of requeueing", () => {
  const state = newState();
  addWorker(state, "w1");
  addWorker(state, "w2", { currentLoad: 1 });
  addRequest(state, "r1"); // w1
  step(state, { kind: "shutdownRequested", atMs: 0 });
  const effects = step(state, {
    kind: "workerDisconnected",
    atMs: 1,
    workerId: "w1",
    reason: "eof",
  });
  assert.deepEqual(dispatched(effects), []);
  const err = only(effects, "respondError").error;
  assert.equal(err.status, 503);
  assert.equal(err.code, "shutting_down");
  assert.equal(err.retryAfterSecs, 1);
  assert.equal(only(effects, "shutdownComplete").kind, "shutdownComplete");
});
