import assert from "node:assert/strict";
import {
  actions,
  addRequest,
  addWorker,
  chunk,
  complete,
  disconnect,
  dispatched,
  newState,
  ofKind,
  only,
  queued,
  sent,
  statusOf,
  step,
  tick,
  worker,
  workerError,
} from "../_testing.ts";
import type { Event } from "./event.ts";

/** The worker's backend refused the connection (scoped to `requestId`, or not). */
function unreachable(
  workerId: string,
  requestId: string | null,
  atMs = 0,
): Event {
  const message = "connection refused";
  return workerError(workerId, requestId, "backend_unreachable", message, atMs);
}

// ---- C22: requeue on worker disconnect ---------------------------------------------

Deno.test("C22 a worker disconnect requeues its in-flight requests keeping their original enqueueSeq", () => {
  const state = newState();
  addWorker(state, "w1", { maxConcurrent: 1, atMs: 0 });
  addRequest(state, "r1", { atMs: 0 });
  addRequest(state, "r2", { atMs: 1 });
  addRequest(state, "r3", { atMs: 2 });
  const seq1 = state.requests.get("r1")!.enqueueSeq;
  assert.deepEqual(queued(state), ["r2", "r3"]);
  const effects = disconnect(state, "w1", 10);
  assert.equal(
    effects.filter((e) =>
      e.kind === "respondError" || e.kind === "requestFinished"
    ).length,
    0,
  );
  assert.equal(
    effects.filter((e) => e.kind === "log" && e.message === "request requeued")
      .length,
    1,
  );
  assert.equal(state.workers.size, 0);
  // r1 goes back to the head of the queue, ahead of the younger r2 and r3.
  const r1 = state.requests.get("r1")!;
  assert.equal(r1.status.kind, "queued");
  assert.equal(r1.enqueueSeq, seq1);
  assert.equal(r1.requeueCount, 1);
  assert.deepEqual(queued(state), ["r1", "r2", "r3"]);
  // The next worker gets r1 first.
  const next = addWorker(state, "w2", { maxConcurrent: 1, atMs: 11 });
  assert.deepEqual(dispatched(next), [["r1", "w2"]]);
});

Deno.test("C22 a requeue never extends the request's deadline", () => {
  const state = newState({ requestTimeoutMs: 1_000, queueTimeoutMs: 30_000 });
  addWorker(state, "w1", { atMs: 0 });
  addRequest(state, "r1", { atMs: 100 });
  const deadline = state.requests.get("r1")!.deadlineAtMs;
  assert.equal(deadline, 1_100);
  disconnect(state, "w1", 900);
  const r1 = state.requests.get("r1")!;
  assert.equal(r1.deadlineAtMs, 1_100);
  assert.ok(r1.status.kind === "queued");
  // The queue deadline is capped by the request deadline, not now + 30 s.
  assert.equal(
    r1.status.kind === "queued" && r1.status.queueDeadlineAtMs,
    1_100,
  );
  assert.deepEqual(actions(tick(state, 1_099)), []);
  const effects = tick(state, 1_100);
  assert.equal(only(effects, "respondError").error.status, 504);
  assert.equal(sent(effects, "cancel").length, 0);
  assert.equal(state.requests.size, 0);
});

Deno.test("C22 a requeued request redispatched to another worker keeps its arrival deadline", () => {
  const state = newState({ requestTimeoutMs: 1_000 });
  addWorker(state, "w1", { atMs: 0 });
  addWorker(state, "w2", { atMs: 0, currentLoad: 1 });
  addRequest(state, "r1", { atMs: 0 }); // w1, lower load
  const effects = disconnect(state, "w1", 500);
  assert.deepEqual(dispatched(effects), [["r1", "w2"]]);
  assert.equal(state.requests.get("r1")!.deadlineAtMs, 1_000);
  assert.equal(state.requests.get("r1")!.queueWaitMs, 0);
  const t = tick(state, 1_000);
  assert.equal(sent(t, "cancel", "w2")[0]?.reason, "timeout");
  assert.equal(only(t, "respondError").error.code, "request_timeout");
});

Deno.test("C22 partial output of a non-streaming request is discarded when it is requeued", () => {
  const state = newState();
  addWorker(state, "w1", { maxConcurrent: 1 });
  addRequest(state, "r1", { stream: false });
  chunk(state, "w1", "r1", '{"partial":');
  disconnect(state, "w1");
  addWorker(state, "w2");
  const effects = complete(state, "w2", "r1", { body: '{"whole":true}' });
  assert.equal(only(effects, "respond").body, '{"whole":true}');
});

Deno.test("C22 a request past its deadline fails at once on worker disconnect instead of being requeued", () => {
  const state = newState({ requestTimeoutMs: 1_000 });
  addWorker(state, "w1", { atMs: 0 });
  addWorker(state, "w2", { atMs: 0, currentLoad: 1 });
  addRequest(state, "r1", { atMs: 0 });
  // The deadline passed but no tick has run yet when the worker drops.
  const effects = disconnect(state, "w1", 1_000);
  assert.deepEqual(dispatched(effects), []);
  const err = only(effects, "respondError").error;
  assert.equal(err.status, 504);
  assert.equal(err.code, "request_timeout");
  assert.equal(state.requests.size, 0);
  assert.equal(worker(state, "w2").inFlight.size, 0);
});

// ---- C23: requeue cap ------------------------------------------------------------------

Deno.test("C23 a request is requeued at most 3 times, then 503 requeue_exhausted", () => {
  const state = newState();
  assert.equal(state.config.requeueCountMax, 3);
  addRequest(state, "r1", { atMs: 0 });
  for (let i = 1; i <= 3; i++) {
    assert.deepEqual(dispatched(addWorker(state, `w${i}`, { atMs: i })), [[
      "r1",
      `w${i}`,
    ]]);
    const effects = disconnect(state, `w${i}`, i);
    assert.equal(ofKind(effects, "respondError").length, 0, `requeue ${i}`);
    assert.equal(state.requests.get("r1")?.requeueCount, i);
    assert.equal(statusOf(state, "r1"), "queued");
  }
  assert.deepEqual(dispatched(addWorker(state, "w4", { atMs: 4 })), [[
    "r1",
    "w4",
  ]]);
  const effects = disconnect(state, "w4", 5);
  const err = only(effects, "respondError").error;
  assert.equal(err.status, 503);
  assert.equal(err.code, "requeue_exhausted");
  assert.match(err.message, /requeue attempts exhausted/);
  // Issue 24.5: attempts are counted, not workers (often one worker, retried).
  assert.match(err.message, /failed 4 attempts/);
  assert.equal(err.retryAfterSecs, 1);
  const fin = only(effects, "requestFinished");
  assert.equal(fin.outcome, "failed");
  assert.equal(fin.requeues, 3);
  assert.equal(
    effects.filter((e) => e.kind === "log" && e.message === "requeue exhausted")
      .length,
    1,
  );
  assert.equal(state.requests.size, 0);
  assert.deepEqual(queued(state), []);
});

// ---- C24: a started stream is not requeued --------------------------------------------------

Deno.test("C24 a stream whose first bytes reached the client ends with an SSE error instead of a requeue", () => {
  const state = newState();
  addWorker(state, "w1");
  addWorker(state, "w2");
  addRequest(state, "r1", { stream: true });
  chunk(state, "w1", "r1", "data: half\n\n");
  const effects = disconnect(state, "w1");
  assert.deepEqual(dispatched(effects), []);
  const end = only(effects, "endStream");
  assert.equal(end.requestId, "r1");
  assert.equal(end.error?.status, 502);
  assert.equal(end.error?.code, "worker_disconnected");
  assert.equal(ofKind(effects, "respondError").length, 0);
  assert.equal(only(effects, "requestFinished").outcome, "failed");
  assert.equal(state.requests.size, 0);
  assert.equal(worker(state, "w2").inFlight.size, 0);
});

Deno.test("C24 a streaming request with no byte sent yet is requeued normally", () => {
  const state = newState();
  addWorker(state, "w1");
  addWorker(state, "w2", { currentLoad: 1 });
  addRequest(state, "r1", { stream: true });
  const effects = disconnect(state, "w1");
  assert.deepEqual(dispatched(effects), [["r1", "w2"]]);
  assert.equal(ofKind(effects, "endStream").length, 0);
  assert.equal(state.requests.get("r1")?.requeueCount, 1);
});

// ---- C27: worker error frames -----------------------------------------------------------------

Deno.test("C27 a scoped worker error requeues a request that has not started", () => {
  const state = newState();
  addWorker(state, "w1", { maxConcurrent: 1 });
  addWorker(state, "w2", { maxConcurrent: 1, currentLoad: 0 });
  addRequest(state, "r1"); // w1
  const effects = step(state, unreachable("w1", "r1"));
  assert.ok(
    effects.some((e) =>
      e.kind === "log" && e.level === "warn" && e.message === "worker error"
    ),
  );
  assert.deepEqual(dispatched(effects), [["r1", "w2"]]);
  assert.equal(ofKind(effects, "respondError").length, 0);
  assert.equal(state.requests.get("r1")?.requeueCount, 1);
  assert.equal(worker(state, "w1").inFlight.size, 0);
  // The worker stays connected: an error frame is not a disconnect.
  assert.equal(state.workers.has("w1"), true);
});

Deno.test("C27 a scoped worker error on a started stream fails it with a 502 SSE error", () => {
  const state = newState();
  addWorker(state, "w1");
  addRequest(state, "r1", { stream: true });
  chunk(state, "w1", "r1", "data: 1\n\n");
  const effects = step(state, unreachable("w1", "r1"));
  const end = only(effects, "endStream");
  assert.equal(end.error?.status, 502);
  assert.match(end.error?.message ?? "", /connection refused/);
  assert.equal(sent(effects, "cancel").length, 0);
  assert.equal(state.requests.size, 0);
  assert.equal(worker(state, "w1").inFlight.size, 0);
  assert.equal(worker(state, "w1").cancelling.size, 0);
});

Deno.test("C27 a scoped worker error fails with an error once requeues are exhausted", () => {
  const state = newState({ requeueCountMax: 0 });
  addWorker(state, "w1");
  addRequest(state, "r1");
  const effects = step(state, unreachable("w1", "r1"));
  const err = only(effects, "respondError").error;
  assert.equal(err.status, 503);
  assert.equal(err.code, "requeue_exhausted");
  assert.equal(state.requests.size, 0);
});

Deno.test("C27 an unscoped worker error is only logged", () => {
  const state = newState();
  addWorker(state, "w1");
  addRequest(state, "r1");
  const effects = step(state, unreachable("w1", null));
  assert.deepEqual(actions(effects), []);
  assert.equal(effects.length, 1);
  const log = effects[0]!;
  assert.ok(log.kind === "log" && log.level === "warn");
  assert.equal(statusOf(state, "r1"), "dispatched");
  assert.deepEqual([...worker(state, "w1").inFlight], ["r1"]);
  assert.equal(state.workers.has("w1"), true);
});
