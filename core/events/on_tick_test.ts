import assert from "node:assert/strict";
import type { Effect } from "../effect.ts";
import type { State } from "../state/state.ts";
import {
  actions,
  addRequest,
  addWorker,
  chunk,
  complete,
  disconnect,
  dispatched,
  logs,
  newState,
  ofKind,
  only,
  pong,
  queued,
  sent,
  statusOf,
  tick,
  worker,
} from "../_testing.ts";

/** Every connected worker answers its heartbeat at `atMs`, then time ticks. */
function aliveTick(state: State, atMs: number): Effect[] {
  for (const id of [...state.workers.keys()]) pong(state, id, null, atMs);
  return tick(state, atMs);
}

// ---- C12: queue timeout -------------------------------------------------------------

Deno.test("C12 queue timeout answers 504 and sends no cancel", () => {
  const state = newState();
  assert.equal(state.config.queueTimeoutMs, 30_000);
  addWorker(state, "w1", { maxConcurrent: 1, atMs: 0 });
  addRequest(state, "r1", { atMs: 0 });
  addRequest(state, "r2", { atMs: 1_000 });
  addRequest(state, "r3", { atMs: 2_000 });
  const r2 = state.requests.get("r2")!;
  assert.ok(
    r2.status.kind === "queued" && r2.status.queueDeadlineAtMs === 31_000,
  );
  // Nothing but pings before the deadline.
  const early = aliveTick(state, 30_999);
  assert.deepEqual(actions(early).filter((e) => e.kind !== "sendToWorker"), []);
  assert.equal(state.requests.size, 3);
  const effects = aliveTick(state, 31_000);
  assert.deepEqual(sent(effects, "cancel"), []);
  const err = only(effects, "respondError");
  assert.equal(err.requestId, "r2");
  assert.deepEqual(err.error, {
    status: 504,
    code: "queue_timeout",
    message: "queue timeout: no worker available within deadline",
  });
  const fin = only(effects, "requestFinished");
  assert.equal(fin.outcome, "failed");
  assert.equal(fin.status, 504);
  assert.equal(fin.queueWaitMs, 30_000);
  assert.equal(logs(effects, "queue timeout").length, 1);
  // State: r2 gone from requests and queue; r3 still waits; r1 untouched.
  assert.equal(state.requests.has("r2"), false);
  assert.deepEqual(queued(state), ["r3"]);
  assert.equal(statusOf(state, "r1"), "dispatched");
  assert.deepEqual([...worker(state, "w1").inFlight], ["r1"]);
  assert.equal(worker(state, "w1").cancelling.size, 0);
});

Deno.test("C12 queue timeout with no worker connected at all", () => {
  const state = newState({ queueTimeoutMs: 1_000 });
  addRequest(state, "r1", { atMs: 0 });
  const effects = tick(state, 1_000);
  assert.deepEqual(actions(effects).map((e) => e.kind), [
    "respondError",
    "requestFinished",
  ]);
  assert.equal(state.requests.size, 0);
});

// ---- C19, C48: request timeout ----------------------------------------------------------

Deno.test("C19 request timeout counts from arrival: cancel timeout to the worker and 504 to the client", () => {
  const state = newState({
    requestTimeoutMs: 300_000,
    queueTimeoutMs: 200_000,
  });
  addWorker(state, "w1", { maxConcurrent: 1, atMs: 0 });
  addRequest(state, "r0", { atMs: 0 });
  addRequest(state, "r1", { atMs: 0 }); // waits 100 s in the queue
  for (let t = 15_000; t < 100_000; t += 15_000) aliveTick(state, t);
  assert.deepEqual(dispatched(complete(state, "w1", "r0", { atMs: 100_000 })), [
    ["r1", "w1"],
  ]);
  for (let t = 105_000; t < 300_000; t += 15_000) {
    assert.equal(ofKind(aliveTick(state, t), "respondError").length, 0);
  }
  aliveTick(state, 299_999);
  assert.equal(statusOf(state, "r1"), "dispatched");
  pong(state, "w1", null, 300_000);
  const effects = tick(state, 300_000); // arrival + 300 s, not dispatch + 300 s
  const acts = actions(effects).filter((e) =>
    !(e.kind === "sendToWorker" && e.message.type === "ping")
  );
  assert.deepEqual(acts[0], {
    kind: "sendToWorker",
    workerId: "w1",
    message: { type: "cancel", request_id: "r1", reason: "timeout" },
  });
  assert.deepEqual(only(effects, "respondError").error, {
    status: 504,
    code: "request_timeout",
    message: "request timeout",
  });
  assert.equal(only(effects, "requestFinished").durationMs, 300_000);
  assert.equal(state.requests.size, 0);
  assert.equal(worker(state, "w1").inFlight.size, 0);
  assert.ok(worker(state, "w1").cancelling.has("r1"));
});

Deno.test("C48 a stream with no first byte by the deadline gets 504 and cancel timeout", () => {
  const state = newState({ requestTimeoutMs: 10_000 });
  addWorker(state, "w1", { atMs: 0 });
  addRequest(state, "r1", { atMs: 0, stream: true });
  const effects = aliveTick(state, 10_000);
  assert.equal(sent(effects, "cancel", "w1")[0]?.reason, "timeout");
  assert.equal(only(effects, "respondError").error.status, 504);
  assert.equal(ofKind(effects, "startStream").length, 0);
  assert.equal(state.requests.size, 0);
});

Deno.test("C48 a flowing stream is never cut by the request timeout", () => {
  const state = newState({ requestTimeoutMs: 10_000 });
  addWorker(state, "w1", { atMs: 0 });
  addRequest(state, "r1", { atMs: 0, stream: true });
  // Chunks every 5 s for 60 s: six times the request timeout.
  for (let t = 5_000; t <= 60_000; t += 5_000) {
    chunk(state, "w1", "r1", `data: ${t}\n\n`, t);
    const effects = aliveTick(state, t);
    assert.equal(sent(effects, "cancel").length, 0, `t=${t}`);
    assert.equal(ofKind(effects, "endStream").length, 0, `t=${t}`);
  }
  assert.equal(statusOf(state, "r1"), "streaming");
  assert.ok(worker(state, "w1").inFlight.has("r1"));
});

Deno.test("C48 once streaming, the timeout is an idle limit: a stalled stream ends with an SSE error and cancel timeout", () => {
  const state = newState({ requestTimeoutMs: 10_000 });
  addWorker(state, "w1", { atMs: 0 });
  addRequest(state, "r1", { atMs: 0, stream: true });
  chunk(state, "w1", "r1", "data: a\n\n", 8_000);
  // Past arrival + timeout, but only 9.999 s idle: kept.
  assert.equal(ofKind(aliveTick(state, 17_999), "endStream").length, 0);
  assert.equal(statusOf(state, "r1"), "streaming");
  const effects = aliveTick(state, 18_000);
  assert.equal(sent(effects, "cancel", "w1")[0]?.reason, "timeout");
  const end = only(effects, "endStream");
  assert.equal(end.error?.status, 504);
  assert.equal(end.error?.code, "request_timeout");
  assert.equal(ofKind(effects, "respondError").length, 0);
  assert.equal(only(effects, "requestFinished").firstByteMs, 8_000);
  assert.equal(state.requests.size, 0);
  assert.ok(worker(state, "w1").cancelling.has("r1"));
});

// ---- C25, C43: heartbeat -----------------------------------------------------------------

Deno.test("C25 the server pings every 15 s", () => {
  const state = newState();
  addWorker(state, "w1", { atMs: 0 });
  assert.deepEqual(sent(tick(state, 14_999), "ping"), []);
  assert.deepEqual(sent(tick(state, 15_000), "ping", "w1"), [
    { type: "ping", timestamp_unix_ms: 15_000, to: "w1" },
  ]);
  assert.equal(worker(state, "w1").nextPingAtMs, 30_000);
  assert.deepEqual(sent(tick(state, 20_000), "ping"), []);
  pong(state, "w1", 0, 20_000);
  assert.equal(sent(tick(state, 30_000), "ping").length, 1);
});

Deno.test("C43 pings go out every 15 s even while the worker is busy streaming", () => {
  const state = newState();
  addWorker(state, "w1", { atMs: 0 });
  addRequest(state, "r1", { atMs: 0, stream: true });
  const pings: number[] = [];
  for (let t = 1_000; t <= 120_000; t += 1_000) {
    chunk(state, "w1", "r1", "data: x\n\n", t);
    for (const p of sent(tick(state, t), "ping", "w1")) {
      pings.push(p.timestamp_unix_ms ?? -1);
    }
    if (t % 15_000 === 1_000) pong(state, "w1", 1, t);
  }
  assert.deepEqual(pings, [
    15_000,
    30_000,
    45_000,
    60_000,
    75_000,
    90_000,
    105_000,
    120_000,
  ]);
  assert.equal(statusOf(state, "r1"), "streaming");
  assert.equal(state.workers.has("w1"), true);
});

Deno.test("C25 no pong within 45 s closes with 1000 worker heartbeat timed out and requeues", () => {
  // A queue timeout past the 75 s of the test: the queue clock starts at
  // arrival (C22, issue 14.8), and this test is about the requeue itself.
  const state = newState({ queueTimeoutMs: 120_000 });
  addWorker(state, "w1", { atMs: 0 });
  addRequest(state, "r1", { atMs: 0 });
  tick(state, 15_000);
  tick(state, 30_000);
  pong(state, "w1", 1, 30_000);
  tick(state, 45_000);
  tick(state, 60_000);
  assert.equal(state.workers.has("w1"), true);
  assert.equal(worker(state, "w1").lastHeartbeatAtMs, 30_000);
  assert.deepEqual(
    actions(tick(state, 74_999)).filter((e) => e.kind === "closeWorker"),
    [],
  );
  const effects = tick(state, 75_000);
  assert.deepEqual(only(effects, "closeWorker"), {
    kind: "closeWorker",
    workerId: "w1",
    code: 1000,
    reason: "worker heartbeat timed out",
  });
  assert.equal(logs(effects, "worker heartbeat timed out").length, 1);
  assert.equal(logs(effects, "request requeued").length, 1);
  assert.equal(sent(effects, "ping").length, 0);
  assert.equal(state.workers.size, 0);
  assert.equal(statusOf(state, "r1"), "queued");
  assert.equal(state.requests.get("r1")?.requeueCount, 1);
  // The requeued request goes to the next worker.
  assert.deepEqual(dispatched(addWorker(state, "w2", { atMs: 75_001 })), [[
    "r1",
    "w2",
  ]]);
  // A late socket-close event for w1 does nothing more.
  assert.deepEqual(disconnect(state, "w1"), []);
});
