// Issue 14, "real backends and real faults": each test is named after the
// failure it pins and failed on the core before the fix, except the one marked
// "already tolerated", which pins behaviour body-chunks-v1 builds on.
import assert from "node:assert/strict";
import {
  actions,
  addRequest,
  addWorker,
  chunk,
  complete,
  connect,
  disconnect,
  dispatched,
  drainRequested,
  modelsUpdate,
  newState,
  ofKind,
  only,
  pong,
  register,
  routed,
  sent,
  statusOf,
  step,
  tick,
  worker,
  workerError,
} from "../_testing.ts";
import { workerViews } from "../queries.ts";
import type { Event } from "./event.ts";
import { eventFromFrame } from "./from_frame.ts";

/** A worker's error about one of its requests, its message the code in words. */
function scopedError(workerId: string, requestId: string, code: string): Event {
  return workerError(workerId, requestId, code, code.replace("_", " "));
}

// ---- item 1: a draining worker made its models answer 404 ---------------------

Deno.test("issue 14.1 register_ack offers drain-v1 and body-chunks-v1 to a worker that lists them", () => {
  const state = newState();
  connect(state, "w1", { atMs: 0, clientIp: "10.0.0.1" });
  const effects = step(state, {
    ...register("w1", { models: ["m"] }),
    extensions: ["drain-v1", "body-chunks-v1"],
  });
  const ack = sent(effects, "register_ack")[0]!;
  assert.ok(ack.extensions?.includes("drain-v1"));
  assert.ok(ack.extensions?.includes("body-chunks-v1"));
  assert.deepEqual(worker(state, "w1").extensions, [
    "drain-v1",
    "body-chunks-v1",
  ]);
});

Deno.test("issue 14.1 C28 a worker draining itself (drain-v1) keeps its models known: new requests queue, never 404, and are not sent to it", () => {
  const state = newState();
  addWorker(state, "w1", { models: ["m"], maxConcurrent: 4 });
  addRequest(state, "r1");
  const effects = step(state, modelsUpdate("w1", ["m"], { draining: true }));
  assert.deepEqual(actions(effects), []);
  assert.equal(worker(state, "w1").draining, true);
  assert.equal(workerViews(state)[0]?.draining_itself, true);
  const second = addRequest(state, "r2");
  assert.equal(ofKind(second, "respondError").length, 0, "no 404");
  assert.deepEqual(dispatched(second), []);
  assert.equal(statusOf(state, "r2"), "queued");
  // The in-flight request finishes; the worker closes its own socket, not us.
  const done = complete(state, "w1", "r1", { body: "ok" });
  assert.equal(only(done, "respond").body, "ok");
  assert.equal(ofKind(done, "closeWorker").length, 0);
  assert.equal(state.workers.has("w1"), true);
  // A worker that can serve the model takes the queued request.
  const fresh = addWorker(state, "w2", { models: ["m"] });
  assert.deepEqual(dispatched(fresh), [["r2", "w2"]]);
});

Deno.test("issue 14.1 a self-draining worker gets no drain deadline and its socket close requeues nothing finished", () => {
  const state = newState({ drainTimeoutMs: 1_000 });
  addWorker(state, "w1", { models: ["m"] });
  addRequest(state, "r1");
  step(state, modelsUpdate("w1", ["m"], { draining: true }));
  assert.equal(worker(state, "w1").draining, true);
  assert.equal(worker(state, "w1").drainDeadlineAtMs, null);
  assert.equal(ofKind(tick(state, 5_000), "closeWorker").length, 0);
  complete(state, "w1", "r1");
  assert.equal(ofKind(disconnect(state, "w1"), "requestFinished").length, 0);
});

// ---- item 2: an answer larger than a frame --------------------------------------

Deno.test("issue 14.2 an oversized response_complete from an original worker fails its request 502 response_too_large, without disconnecting or requeueing", () => {
  const state = newState({ frameCharsMax: 200 });
  addWorker(state, "w1", { models: ["m"], maxConcurrent: 1 });
  addWorker(state, "w2", { models: ["m"], maxConcurrent: 1 });
  addRequest(state, "r1");
  const frame = JSON.stringify({
    type: "response_complete",
    request_id: "r1",
    status_code: 200,
    body: "x".repeat(500),
  });
  const effects = step(state, eventFromFrame("w1", 1, frame, 200));
  const error = only(effects, "respondError").error;
  assert.equal(error.status, 502);
  assert.equal(error.code, "response_too_large");
  assert.equal(ofKind(effects, "closeWorker").length, 0);
  assert.deepEqual(dispatched(effects), [], "never run twice");
  assert.equal(state.requests.size, 0);
  // The worker stays, its slot is free again.
  assert.equal(worker(state, "w1").inFlight.size, 0);
  assert.equal(worker(state, "w1").routeLevel, 0);
});

Deno.test("issue 14.2 an oversized response_chunk fails its request and cancels it on the worker", () => {
  const state = newState({ frameCharsMax: 200 });
  addWorker(state, "w1", { models: ["m"] });
  addRequest(state, "r1", { stream: true });
  chunk(state, "w1", "r1", "data: a\n\n");
  const frame = JSON.stringify({
    type: "response_chunk",
    request_id: "r1",
    chunk: "y".repeat(500),
  });
  const effects = step(state, eventFromFrame("w1", 1, frame, 200));
  assert.equal(only(effects, "endStream").error?.code, "response_too_large");
  assert.deepEqual(
    sent(effects, "cancel").map((c) => c.reason),
    [{ other: "response_too_large" }],
  );
  assert.equal(ofKind(effects, "closeWorker").length, 0);
  assert.equal(ofKind(effects, "writeChunk").length, 0);
});

Deno.test("issue 14.2 body-chunks-v1 (already tolerated) a non-streaming body in pieces is assembled with the completion's status and headers", () => {
  const state = newState();
  addWorker(state, "w1", { models: ["m"] });
  addRequest(state, "r1");
  assert.deepEqual(actions(chunk(state, "w1", "r1", '{"a":')), []);
  chunk(state, "w1", "r1", '"bc');
  const effects = complete(state, "w1", "r1", {
    status: 201,
    headers: { "content-type": "application/json" },
    body: '"}',
  });
  const r = only(effects, "respond");
  assert.equal(r.status, 201);
  // Issue 24: the pieces as they came (as bytes), never joined in the core.
  assert.deepEqual(
    r.bodyPieces?.map((p) => new TextDecoder().decode(p)),
    ['{"a":', '"bc'],
  );
  assert.equal(r.body, '"}');
  assert.deepEqual(r.headers, { "content-type": "application/json" });
});

Deno.test("issue 14.2 body-chunks-v1 a completion that takes the assembled body past the limit fails 502 response_too_large, not requeued", () => {
  const state = newState({ responseBodyCharsMax: 10 });
  addWorker(state, "w1", { models: ["m"] });
  addWorker(state, "w2", { models: ["m"] });
  addRequest(state, "r1");
  chunk(state, "w1", "r1", "123456");
  const effects = complete(state, "w1", "r1", { body: "78901" });
  assert.equal(only(effects, "respondError").error.code, "response_too_large");
  assert.deepEqual(dispatched(effects), []);
  assert.equal(sent(effects, "cancel").length, 0, "the worker is done");
  assert.equal(worker(state, "w1").inFlight.size, 0);
});

// ---- item 3: a backend that refuses connections --------------------------------

Deno.test("issue 14.3 a request refused by a worker's backend waits for another worker serving the model instead of going back", () => {
  const state = newState();
  addWorker(state, "w1", { models: ["m"], maxConcurrent: 1 });
  addWorker(state, "w2", { models: ["m"], maxConcurrent: 1 });
  assert.deepEqual(routed(state, "r1"), [["r1", "w1"]]);
  assert.deepEqual(routed(state, "r2"), [["r2", "w2"]]);
  const refused = step(state, scopedError("w1", "r1", "backend_unavailable"));
  assert.deepEqual(dispatched(refused), [], "w1 is free but refused it");
  assert.equal(statusOf(state, "r1"), "queued");
  // A newcomer is not held behind it: w1 takes it.
  assert.deepEqual(routed(state, "r3"), [["r3", "w1"]]);
  const freed = complete(state, "w2", "r2");
  assert.deepEqual(dispatched(freed), [["r1", "w2"]]);
});

Deno.test("issue 14.3 with no other worker a refused request is retried on the same one, then fails 503 requeue_exhausted, never hangs", () => {
  const state = newState();
  addWorker(state, "w1", { models: ["m"] });
  addRequest(state, "r1");
  for (let i = 0; i < 2; i++) {
    const again = step(state, scopedError("w1", "r1", "backend_unavailable"));
    assert.deepEqual(dispatched(again), [["r1", "w1"]], `retry ${i + 1}`);
  }
  // The third refusal opens w1's backend circuit: r1 waits for the trial.
  const third = step(state, scopedError("w1", "r1", "backend_unavailable"));
  assert.deepEqual(dispatched(third), []);
  assert.equal(worker(state, "w1").backend.kind, "open");
  assert.deepEqual(dispatched(tick(state, 4_999)), []);
  assert.deepEqual(dispatched(tick(state, 5_000)), [["r1", "w1"]]);
  const last = step(state, scopedError("w1", "r1", "backend_unavailable"));
  const error = only(last, "respondError").error;
  assert.equal(error.status, 503);
  assert.equal(error.code, "requeue_exhausted");
  assert.match(error.message, /backend unavailable/);
});

Deno.test("issue 14.3 backend circuit: 3 refusals take a worker out of routing for 5 s, a trial request brings it back, a failed trial doubles the cool-down", () => {
  const state = newState({ requeueCountMax: 100 });
  addWorker(state, "w1", { models: ["m"], maxConcurrent: 4 });
  addRequest(state, "r0");
  for (let i = 0; i < 3; i++) {
    step(state, scopedError("w1", "r0", "backend_unavailable"));
  }
  assert.deepEqual(worker(state, "w1").backend, {
    kind: "open",
    untilMs: 5_000,
    coolDownMs: 5_000,
  });
  assert.equal(statusOf(state, "r0"), "queued");
  assert.equal(workerViews(state)[0]?.backend_circuit, "open"); // /admin/workers
  assert.deepEqual(routed(state, "x"), [], "out of routing");
  // Cool-down over: one trial, which fails: 10 s now.
  assert.deepEqual(dispatched(tick(state, 5_000)), [["r0", "w1"]]);
  step(state, scopedError("w1", "r0", "backend_unavailable"));
  assert.deepEqual(worker(state, "w1").backend, {
    kind: "open",
    untilMs: 15_000,
    coolDownMs: 10_000,
  });
  // The next trial goes alone and succeeds: the circuit closes, x follows.
  assert.deepEqual(dispatched(tick(state, 15_000)), [["r0", "w1"]]);
  const ok = complete(state, "w1", "r0");
  assert.deepEqual(worker(state, "w1").backend, {
    kind: "closed",
    failures: 0,
  });
  assert.deepEqual(dispatched(ok), [["x", "w1"]]);
});

Deno.test("issue 14.3 the backend cool-down doubles up to 60 s", () => {
  const state = newState({ requeueCountMax: 1_000, queueTimeoutMs: 1e9 });
  addWorker(state, "w1", { models: ["m"] });
  addRequest(state, "r0");
  for (let i = 0; i < 3; i++) {
    step(state, scopedError("w1", "r0", "backend_unavailable"));
  }
  const seen: number[] = [];
  for (let i = 0; i < 6; i++) {
    const b = worker(state, "w1").backend;
    assert.equal(b.kind, "open");
    if (b.kind !== "open") return;
    seen.push(b.coolDownMs);
    pong(state, "w1", 0, b.untilMs); // alive all along (C25)
    tick(state, b.untilMs);
    step(state, scopedError("w1", "r0", "backend_unavailable"));
  }
  assert.deepEqual(seen, [5_000, 10_000, 20_000, 40_000, 60_000, 60_000]);
});

Deno.test("issue 14.3 an answer from the backend resets the consecutive refusal count", () => {
  const state = newState();
  addWorker(state, "w1", { models: ["m"], maxConcurrent: 4 });
  addRequest(state, "a");
  addRequest(state, "b");
  step(state, scopedError("w1", "a", "backend_unavailable"));
  step(state, scopedError("w1", "b", "backend_unavailable"));
  chunk(state, "w1", "a", "partial");
  assert.deepEqual(worker(state, "w1").backend, {
    kind: "closed",
    failures: 0,
  });
});

// ---- item 4: an error after the stream started ---------------------------------

Deno.test("issue 14.4 a completion with status >= 400 after a stream started ends it with an SSE error, never a spliced body or a normal end", () => {
  const state = newState();
  addWorker(state, "w1", { models: ["m"] });
  addRequest(state, "r1", { stream: true });
  chunk(state, "w1", "r1", 'data: {"x":1}\n\n');
  const effects = complete(state, "w1", "r1", {
    status: 500,
    body: '{"error":{"message":"backend died"}}',
  });
  assert.equal(ofKind(effects, "writeChunk").length, 0);
  const end = only(effects, "endStream");
  assert.ok(end.error !== null);
  assert.equal(end.error.status, 502);
  assert.equal(end.error.code, "upstream_error");
  assert.match(end.error.message, /500/);
  assert.equal(only(effects, "requestFinished").outcome, "failed");
  assert.equal(worker(state, "w1").inFlight.size, 0);
});

// ---- item 8: a requeue restarted the queue timeout -----------------------------

Deno.test("C22 issue 14.8 a requeued request keeps its original queue time for the queue timeout", () => {
  const state = newState({ queueTimeoutMs: 30_000 });
  addRequest(state, "r1", { atMs: 0 }); // no worker: queued at 0
  addWorker(state, "w1", { models: ["m"], atMs: 20_000 });
  assert.equal(statusOf(state, "r1"), "dispatched");
  disconnect(state, "w1", 25_000);
  assert.equal(statusOf(state, "r1"), "queued");
  const effects = tick(state, 30_000);
  assert.equal(only(effects, "respondError").error.code, "queue_timeout");
});

Deno.test("C22 issue 14.8 a request dispatched on arrival and requeued keeps the queue clock of its arrival", () => {
  const state = newState({ queueTimeoutMs: 2_000 });
  addWorker(state, "w1", { models: ["m"], atMs: 0 });
  addRequest(state, "r1", { atMs: 0 });
  assert.equal(statusOf(state, "r1"), "dispatched");
  disconnect(state, "w1", 1_500);
  assert.equal(statusOf(state, "r1"), "queued");
  assert.equal(ofKind(tick(state, 1_999), "respondError").length, 0);
  // 2 s after arrival, not 2 s after the requeue (3.5 s).
  const effects = tick(state, 2_000);
  assert.equal(only(effects, "respondError").error.code, "queue_timeout");
});

Deno.test("C22 a requeue whose queue time is spent still goes to a free worker at once", () => {
  const state = newState({ queueTimeoutMs: 2_000 });
  addWorker(state, "w1", { models: ["m"], atMs: 0 });
  addRequest(state, "r1", { atMs: 0 });
  addWorker(state, "w2", { models: ["m"], atMs: 1_000 });
  // The queue timeout bounds waiting: a request that need not wait is not failed.
  const effects = disconnect(state, "w1", 5_000);
  assert.deepEqual(dispatched(effects), [["r1", "w2"]]);
  assert.equal(ofKind(effects, "respondError").length, 0);
});

// ---- item 9: a request reaching a worker that just started draining -----------

Deno.test("issue 14.9 a scoped worker_draining error requeues the request to another worker at once", () => {
  const state = newState();
  addWorker(state, "w1", { models: ["m"], maxConcurrent: 2 });
  addWorker(state, "w2", { models: ["m"], maxConcurrent: 2 });
  addRequest(state, "r1"); // w1
  addRequest(state, "r0"); // w2: once r1 leaves w1, w1 is the least loaded
  step(state, modelsUpdate("w1", ["m"], { draining: true }));
  const effects = step(state, scopedError("w1", "r1", "worker_draining"));
  assert.deepEqual(dispatched(effects), [["r1", "w2"]]);
  assert.equal(ofKind(effects, "respondError").length, 0);
});

Deno.test("issue 14.3 a trial answered by its first chunk puts the worker back at once: an older queued request goes before a newcomer", () => {
  const state = newState({ requeueCountMax: 100 });
  addWorker(state, "w1", { models: ["m"], maxConcurrent: 2 });
  addRequest(state, "t", { stream: true });
  for (let i = 0; i < 3; i++) {
    step(state, scopedError("w1", "t", "backend_unavailable"));
  }
  assert.deepEqual(dispatched(tick(state, 5_000)), [["t", "w1"]]); // the trial
  addRequest(state, "older"); // waits: one trial at a time
  assert.equal(statusOf(state, "older"), "queued");
  const first = chunk(state, "w1", "t", "data: 1\n\n");
  assert.deepEqual(dispatched(first), [["older", "w1"]]);
});

Deno.test("issue 14.3 a cancelled trial request lets the next trial through at once", () => {
  const state = newState({ requeueCountMax: 100 });
  addWorker(state, "w1", { models: ["m"], maxConcurrent: 2 });
  addRequest(state, "t");
  for (let i = 0; i < 3; i++) {
    step(state, scopedError("w1", "t", "backend_unavailable"));
  }
  addRequest(state, "next");
  assert.deepEqual(dispatched(tick(state, 5_000)), [["t", "w1"]]);
  const gone = step(state, {
    kind: "clientDisconnected",
    atMs: 5_001,
    requestId: "t",
  });
  assert.deepEqual(dispatched(gone), [["next", "w1"]]);
});

Deno.test("issue 14.3 draining the other worker lets a refused request go back to the one that refused it", () => {
  const state = newState();
  addWorker(state, "w1", { models: ["m"], maxConcurrent: 2 });
  addWorker(state, "w2", { models: ["m"], maxConcurrent: 1 });
  addRequest(state, "r1"); // w1
  addRequest(state, "r2"); // w2, now full
  step(state, scopedError("w1", "r1", "backend_unavailable"));
  assert.equal(statusOf(state, "r1"), "queued"); // waits for w2
  const drained = step(state, drainRequested("w2", "operator", 1));
  assert.deepEqual(dispatched(drained), [["r1", "w1"]]);
});

Deno.test("issue 14.2 an oversized response_complete acknowledging a cancel frees the slot and moves the queue", () => {
  const state = newState({ frameCharsMax: 200 });
  addWorker(state, "w1", { models: ["m"], maxConcurrent: 1 });
  addRequest(state, "r1");
  addRequest(state, "r2"); // queued
  step(state, { kind: "clientDisconnected", atMs: 1, requestId: "r1" });
  const frame = JSON.stringify({
    type: "response_complete",
    request_id: "r1",
    status_code: 200,
    body: "x".repeat(500),
  });
  const effects = step(state, eventFromFrame("w1", 2, frame, 200));
  assert.equal(ofKind(effects, "closeWorker").length, 0);
  assert.deepEqual(dispatched(effects), [["r2", "w1"]]);
});
