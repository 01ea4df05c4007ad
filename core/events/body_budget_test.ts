// Issue 24, item 2: non-streaming answers pass through the core as the pieces
// the worker sent (never joined), and a fleet-wide budget of buffered piece
// bytes (MAX_BUFFERED_RESPONSE_BYTES) bounds what the relay holds at once.
import assert from "node:assert/strict";
import {
  addRequest,
  addWorker,
  chunk,
  clientGone,
  complete,
  disconnect,
  dispatched,
  newState,
  only,
  sent,
  statusOf,
  step,
  tick,
} from "../_testing.ts";

function twoRequests(budget: number, perAnswer = 1_000) {
  const state = newState({
    responseBufferBytesMax: budget,
    responseBodyCharsMax: perAnswer,
  });
  addWorker(state, "w1", { models: ["m"] });
  addRequest(state, "r1");
  addRequest(state, "r2");
  return state;
}

Deno.test("issue 24.2 bounded server memory: a piece that would take the fleet's buffered answers past MAX_BUFFERED_RESPONSE_BYTES fails its request 503 response_buffer_full with Retry-After; the other answer goes on", () => {
  const state = twoRequests(10);
  chunk(state, "w1", "r1", "123456");
  chunk(state, "w1", "r2", "abc");
  assert.equal(state.bodyBytesBuffered, 9);
  const effects = chunk(state, "w1", "r2", "de");
  const error = only(effects, "respondError").error;
  assert.equal(error.status, 503);
  assert.equal(error.code, "response_buffer_full");
  assert.ok((error.retryAfterSecs ?? 0) >= 1);
  // The worker stops it; nothing runs it again.
  assert.deepEqual(sent(effects, "cancel", "w1")[0]?.reason, {
    other: "response_buffer_full",
  });
  assert.deepEqual(dispatched(effects), []);
  assert.equal(state.bodyBytesBuffered, 6, "r2's pieces are given back");
  // r1 fits and completes, pieces as they came.
  chunk(state, "w1", "r1", "78");
  const done = complete(state, "w1", "r1", { body: "9" });
  const r = only(done, "respond");
  assert.deepEqual(
    r.bodyPieces?.map((p) => new TextDecoder().decode(p)),
    ["123456", "78"],
  );
  assert.equal(r.body, "9");
  // Still counted while the shell writes it out, until it says so.
  assert.equal(state.bodyBytesBuffered, 8);
  step(state, { kind: "responseSent", atMs: state.nowMs, requestId: "r1" });
  assert.equal(state.bodyBytesBuffered, 0);
});

Deno.test("issue 24.2 an answer handed to the shell stays in the budget until it is written out (a slow reader cannot step around it), or until the request timeout if the shell never says", () => {
  const state = twoRequests(10);
  chunk(state, "w1", "r1", "12345678");
  complete(state, "w1", "r1", { body: "" });
  assert.equal(state.bodyBytesBuffered, 8, "r1 is still being read");
  const effects = chunk(state, "w1", "r2", "abc");
  assert.equal(
    only(effects, "respondError").error.code,
    "response_buffer_full",
  );
  // A shell that never confirms (a crashed instance): released on a tick at
  // the request timeout.
  tick(state, state.config.requestTimeoutMs - 1);
  assert.equal(state.bodyBytesBuffered, 8);
  tick(state, state.config.requestTimeoutMs + 1);
  assert.equal(state.bodyBytesBuffered, 0);
  assert.equal(state.bodiesSending.size, 0);
});

Deno.test("issue 24.2 an answer larger than the whole budget fails 502 response_too_large (it could never fit), not 503", () => {
  const state = twoRequests(5, 1_000);
  const effects = chunk(state, "w1", "r1", "123456");
  assert.equal(only(effects, "respondError").error.code, "response_too_large");
  assert.equal(only(effects, "respondError").error.status, 502);
  assert.equal(state.bodyBytesBuffered, 0);
});

Deno.test("issue 24.2 the budget is given back however an answer ends: a client leaving, a worker lost (requeue), an oversized answer", () => {
  const state = twoRequests(100, 8);
  addWorker(state, "w2", { models: ["m"] });
  chunk(state, "w1", "r1", "1234");
  const r2worker = statusOf(state, "r2") === "dispatched" ? "w1" : "w2";
  chunk(state, r2worker, "r2", "abcd");
  assert.equal(state.bodyBytesBuffered, 8);
  clientGone(state, "r2");
  assert.equal(state.bodyBytesBuffered, 4);
  chunk(state, "w1", "r1", "56789"); // 9 > 8: oversized
  assert.equal(state.bodyBytesBuffered, 0);
  addRequest(state, "r3");
  const holder = [...state.workers.values()].find((w) => w.inFlight.has("r3"))!;
  chunk(state, holder.id, "r3", "xyz");
  assert.equal(state.bodyBytesBuffered, 3);
  disconnect(state, holder.id);
  assert.equal(statusOf(state, "r3") !== undefined, true, "requeued");
  assert.equal(
    state.bodyBytesBuffered,
    0,
    "a lost worker's pieces are dropped",
  );
});

Deno.test("issue 24.2 pieces are counted in UTF-8 bytes: a non-ASCII answer cannot slip past the budget by its character count", () => {
  const state = twoRequests(8);
  chunk(state, "w1", "r1", "\u00e9\u00e9\u00e9"); // 3 characters, 6 bytes
  assert.equal(state.bodyBytesBuffered, 6);
  const effects = chunk(state, "w1", "r2", "\u00e9\u00e9");
  assert.equal(
    only(effects, "respondError").error.code,
    "response_buffer_full",
  );
});
