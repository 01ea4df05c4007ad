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
  logs,
  newState,
  ofKind,
  only,
  requestEvent,
  sent,
  statusOf,
  step,
  tick,
} from "../_testing.ts";

/** Both requests are the default tenant's, whose share is the whole budget here. */
function twoRequests(budget: number, perAnswer = 1_000) {
  const state = newState({
    responseBufferBytesMax: budget,
    tenantResponseBufferBytesMax: budget,
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

Deno.test("issue 24.2 an answer handed to the shell stays in the budget until it is written out (a slow reader cannot step around it)", () => {
  const state = twoRequests(10);
  chunk(state, "w1", "r1", "12345678");
  complete(state, "w1", "r1", { body: "" });
  assert.equal(state.bodyBytesBuffered, 8, "r1 is still being read");
  const effects = chunk(state, "w1", "r2", "abc");
  assert.equal(
    only(effects, "respondError").error.code,
    "response_buffer_full",
  );
  step(state, { kind: "responseSent", atMs: state.nowMs, requestId: "r1" });
  assert.equal(state.bodyBytesBuffered, 0);
  assert.equal(state.bodiesSending.size, 0);
});

Deno.test("issue 33.3 the bytes the shell reports written leave the budget as the client reads, and each report starts the write deadline again", () => {
  const state = twoRequests(10);
  chunk(state, "w1", "r1", "1234");
  chunk(state, "w1", "r1", "5678");
  complete(state, "w1", "r1", { body: "" });
  const deadline = state.config.clientWriteTimeoutMs;
  tick(state, deadline - 1);
  step(state, {
    kind: "responseProgress",
    atMs: state.nowMs,
    requestId: "r1",
    written: 4,
  });
  assert.equal(state.bodyBytesBuffered, 4, "the first piece is let go");
  // A late or repeated report takes nothing more.
  step(state, {
    kind: "responseProgress",
    atMs: state.nowMs,
    requestId: "r1",
    written: 4,
  });
  assert.equal(state.bodyBytesBuffered, 4);
  const t = tick(state, 2 * deadline - 2);
  assert.deepEqual(ofKind(t, "cutResponse"), [], "it made progress in time");
  step(state, { kind: "responseSent", atMs: state.nowMs, requestId: "r1" });
  assert.equal(state.bodyBytesBuffered, 0);
  assert.equal(state.bodyBytesByTenant.size, 0);
});

Deno.test("issue 33.3 a client that takes none of its handed-over answer for CLIENT_WRITE_TIMEOUT_SECS is cut (cutResponse), and its bytes leave the budget only when the shell lets them go, not at the request timeout", () => {
  const state = twoRequests(10);
  state.config = {
    ...state.config,
    clientWriteTimeoutMs: 5_000,
    requestTimeoutMs: 3_000,
  };
  chunk(state, "w1", "r1", "12345678");
  complete(state, "w1", "r1", { body: "" });
  // Main released the budget here while the shell still held the bytes.
  tick(state, 4_000);
  assert.equal(state.bodyBytesBuffered, 8);
  assert.deepEqual(ofKind(tick(state, 4_999), "cutResponse"), []);
  const cut = tick(state, 5_000);
  assert.deepEqual(ofKind(cut, "cutResponse"), [
    { kind: "cutResponse", requestId: "r1" },
  ]);
  assert.equal(
    logs(cut, "client not reading its answer, connection cut").length,
    1,
  );
  // Told once; still counted until the close comes back.
  assert.deepEqual(ofKind(tick(state, 6_000), "cutResponse"), []);
  assert.equal(state.bodyBytesBuffered, 8);
  step(state, { kind: "responseSent", atMs: 6_001, requestId: "r1" });
  assert.equal(state.bodyBytesBuffered, 0);
});

Deno.test("issue 33.3 a shell that never answers the cut (a cluster instance that died) holds nothing: the bytes are released one more deadline later", () => {
  const state = twoRequests(10);
  state.config = { ...state.config, clientWriteTimeoutMs: 5_000 };
  chunk(state, "w1", "r1", "12345678");
  complete(state, "w1", "r1", { body: "" });
  tick(state, 5_000);
  tick(state, 9_999);
  assert.equal(state.bodyBytesBuffered, 8);
  tick(state, 10_000);
  assert.equal(state.bodyBytesBuffered, 0);
  assert.equal(state.bodiesSending.size, 0);
});

Deno.test("issue 33.3 one tenant's answers hold at most TENANT_MAX_BUFFERED_RESPONSE_BYTES (default: half the budget): its next piece fails 503 response_buffer_full, another tenant's answer still fits", () => {
  const state = newState({
    responseBufferBytesMax: 20,
    responseBodyCharsMax: 1_000,
  });
  addWorker(state, "w1", { models: ["m"], maxConcurrent: 4 });
  step(state, { ...requestEvent(state, "a1"), tenant: "idle" });
  step(state, { ...requestEvent(state, "a2"), tenant: "idle" });
  step(state, { ...requestEvent(state, "b1"), tenant: "busy" });
  chunk(state, "w1", "a1", "12345678");
  complete(state, "w1", "a1", { body: "" }); // handed over, never read
  const refused = chunk(state, "w1", "a2", "abc");
  const error = only(refused, "respondError").error;
  assert.equal(error.status, 503);
  assert.equal(error.code, "response_buffer_full");
  assert.match(error.message, /TENANT_MAX_BUFFERED_RESPONSE_BYTES 10/);
  assert.ok((error.retryAfterSecs ?? 0) >= 1);
  assert.deepEqual(chunk(state, "w1", "b1", "abcdefghij"), []);
  assert.equal(state.bodyBytesByTenant.get("idle"), 8);
  assert.equal(state.bodyBytesByTenant.get("busy"), 10);
  assert.equal(only(complete(state, "w1", "b1"), "respond").status, 200);
});

Deno.test("issue 33.3 TENANT_MAX_BUFFERED_RESPONSE_BYTES set explicitly is the share", () => {
  const state = newState({
    responseBufferBytesMax: 20,
    tenantResponseBufferBytesMax: 4,
    responseBodyCharsMax: 1_000,
  });
  addWorker(state, "w1", { models: ["m"] });
  addRequest(state, "r1");
  assert.equal(
    only(chunk(state, "w1", "r1", "12345"), "respondError").error.code,
    "response_buffer_full",
  );
  assert.equal(state.bodyBytesBuffered, 0);
  assert.equal(state.bodyBytesByTenant.size, 0);
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
