import assert from "node:assert/strict";
import {
  actions,
  addRequest,
  addWorker,
  chunk,
  clientGone,
  complete,
  dispatched,
  newState,
  only,
  queued,
  routed,
  sent,
  statusOf,
  step,
  tick,
  worker,
  workerError,
} from "../_testing.ts";
import { workerViews } from "../queries.ts";

// ---- C18: client disconnect ------------------------------------------------------

Deno.test("C18 a queued request is removed at once on client disconnect, with no cancel", () => {
  const state = newState();
  addWorker(state, "w1", { maxConcurrent: 1 });
  addRequest(state, "r1", { atMs: 0 });
  addRequest(state, "r2", { atMs: 0 });
  addRequest(state, "r3", { atMs: 0 });
  assert.deepEqual(queued(state), ["r2", "r3"]);
  const effects = clientGone(state, "r2", 40);
  assert.deepEqual(sent(effects, "cancel"), []);
  assert.equal(effects.filter((e) => e.kind === "sendToWorker").length, 0);
  const fin = only(effects, "requestFinished");
  assert.equal(fin.requestId, "r2");
  assert.equal(fin.outcome, "cancelled");
  assert.equal(fin.queueWaitMs, 40);
  assert.equal(state.requests.has("r2"), false);
  assert.deepEqual(queued(state), ["r3"]);
  assert.deepEqual([...worker(state, "w1").inFlight], ["r1"]);
  // The queue really forgot it: the freed slot goes to r3.
  assert.deepEqual(dispatched(complete(state, "w1", "r1")), [["r3", "w1"]]);
});

Deno.test("C18 a dispatched request gets cancel client_disconnect on client disconnect", () => {
  const state = newState();
  addWorker(state, "w1");
  addRequest(state, "r1");
  const effects = clientGone(state, "r1", 5);
  const acts = actions(effects);
  assert.deepEqual(acts[0], {
    kind: "sendToWorker",
    workerId: "w1",
    message: { type: "cancel", request_id: "r1", reason: "client_disconnect" },
  });
  const fin = only(effects, "requestFinished");
  assert.equal(fin.outcome, "cancelled");
  assert.equal(
    effects.filter((e) => e.kind === "respondError" || e.kind === "endStream")
      .length,
    0,
  );
  assert.equal(state.requests.has("r1"), false);
  const w = worker(state, "w1");
  assert.equal(w.inFlight.has("r1"), false);
  assert.equal(w.cancelling.get("r1"), 5 + state.config.cancelGraceMs);
});

Deno.test("C18 a streaming request gets cancel client_disconnect on client disconnect", () => {
  const state = newState();
  addWorker(state, "w1");
  addRequest(state, "r1", { stream: true });
  chunk(state, "w1", "r1", "data: 1\n\n");
  const effects = clientGone(state, "r1");
  const [cancel] = sent(effects, "cancel", "w1");
  assert.equal(cancel?.reason, "client_disconnect");
  // The client is gone: nothing more is written to it.
  assert.equal(
    effects.filter((e) => e.kind === "writeChunk" || e.kind === "endStream")
      .length,
    0,
  );
  assert.equal(only(effects, "requestFinished").firstByteMs, 0);
  assert.equal(state.requests.size, 0);
  assert.ok(worker(state, "w1").cancelling.has("r1"));
  // A second disconnect for the same request does nothing.
  assert.deepEqual(clientGone(state, "r1"), []);
});

// ---- C20: late frames after cancel ---------------------------------------------------

Deno.test("C20 chunks arriving after a cancel are dropped silently (debug log only)", () => {
  const state = newState();
  addWorker(state, "w1");
  addRequest(state, "r1", { stream: true });
  chunk(state, "w1", "r1", "data: 1\n\n");
  clientGone(state, "r1");
  for (const text of ["data: 2\n\n", "data: 3\n\n"]) {
    const effects = chunk(state, "w1", "r1", text);
    assert.deepEqual(actions(effects), []);
    assert.equal(effects.length, 1);
    const log = effects[0]!;
    assert.ok(
      log.kind === "log" && log.level === "debug" &&
        log.message === "late frame dropped",
    );
  }
  // Late chunks neither free nor consume the reserved slot.
  assert.ok(worker(state, "w1").cancelling.has("r1"));
  assert.equal(state.requests.size, 0);
});

Deno.test("C20 a late chunk after a timeout is dropped", () => {
  const state = newState({ requestTimeoutMs: 100 });
  addWorker(state, "w1");
  addRequest(state, "r1", { atMs: 0 });
  tick(state, 100);
  assert.equal(state.requests.size, 0);
  assert.deepEqual(actions(chunk(state, "w1", "r1", "x")), []);
});

// ---- C44: cancel frees the slot only on ack or after the grace -----------------------------

Deno.test("C44 a cancelled request's slot stays reserved until the worker's response_complete", () => {
  const state = newState();
  addWorker(state, "w1", { maxConcurrent: 1 });
  addRequest(state, "r1");
  clientGone(state, "r1");
  // Slot still reserved: r2 must wait.
  assert.deepEqual(routed(state, "r2"), []);
  assert.equal(statusOf(state, "r2"), "queued");
  assert.equal(workerViews(state)[0]?.load, 1);
  assert.equal(workerViews(state)[0]?.cancelling, 1);
  // The worker acknowledges the cancel: nothing reaches any client, the slot frees.
  const effects = complete(state, "w1", "r1", { status: 499, body: "" });
  assert.equal(
    effects.filter((e) => e.kind === "respond" || e.kind === "requestFinished")
      .length,
    0,
  );
  assert.deepEqual(dispatched(effects), [["r2", "w1"]]);
  const w = worker(state, "w1");
  assert.equal(w.cancelling.size, 0);
  assert.deepEqual([...w.inFlight], ["r2"]);
});

Deno.test("C44 an error frame also acknowledges a cancel and frees the slot", () => {
  const state = newState();
  addWorker(state, "w1", { maxConcurrent: 1 });
  addRequest(state, "r1");
  clientGone(state, "r1");
  addRequest(state, "r2");
  const effects = step(
    state,
    workerError("w1", "r1", "cancelled", "request cancelled", 1),
  );
  assert.equal(
    effects.filter((e) =>
      e.kind === "respondError" || e.kind === "requestFinished"
    ).length,
    0,
  );
  assert.deepEqual(dispatched(effects), [["r2", "w1"]]);
  assert.equal(worker(state, "w1").cancelling.size, 0);
});

Deno.test("C44 without an ack the slot frees on the first tick after the 5 s grace", () => {
  const state = newState();
  assert.equal(state.config.cancelGraceMs, 5_000);
  addWorker(state, "w1", { maxConcurrent: 1, atMs: 0 });
  addRequest(state, "r1", { atMs: 1_000 });
  clientGone(state, "r1", 2_000);
  addRequest(state, "r2", { atMs: 2_000 });
  assert.deepEqual(dispatched(tick(state, 6_999)), []);
  assert.ok(worker(state, "w1").cancelling.has("r1"));
  assert.equal(statusOf(state, "r2"), "queued");
  const effects = tick(state, 7_000);
  assert.deepEqual(dispatched(effects), [["r2", "w1"]]);
  assert.equal(worker(state, "w1").cancelling.size, 0);
  assert.deepEqual([...worker(state, "w1").inFlight], ["r2"]);
  // A very late ack for r1 is then just a late frame: it frees nothing else.
  const late = complete(state, "w1", "r1");
  assert.deepEqual(actions(late), []);
  assert.deepEqual([...worker(state, "w1").inFlight], ["r2"]);
});

Deno.test("C44 live load from pong still caps dispatch after the cancel grace ends", () => {
  const state = newState();
  addWorker(state, "w1", { maxConcurrent: 1 });
  addRequest(state, "r1");
  clientGone(state, "r1");
  // The worker says it is still busy (its backend has not stopped yet).
  step(state, {
    kind: "pongReceived",
    atMs: 1,
    workerId: "w1",
    currentLoad: 1,
  });
  addRequest(state, "r2");
  tick(state, 1 + state.config.cancelGraceMs);
  assert.equal(worker(state, "w1").cancelling.size, 0);
  assert.equal(statusOf(state, "r2"), "queued");
  const effects = step(state, {
    kind: "pongReceived",
    atMs: 6_000,
    workerId: "w1",
    currentLoad: 0,
  });
  assert.deepEqual(dispatched(effects), [["r2", "w1"]]);
});
