import assert from "node:assert/strict";
import type { Effect } from "../effect.ts";
import { piecesAsText } from "../protocol/binary.ts";
import {
  actions,
  addRequest,
  addWorker,
  chunk,
  complete,
  newState,
  ofKind,
  only,
  sent,
  statusOf,
  step,
  worker,
  workerError,
} from "../_testing.ts";

function oneWorker(overrides = {}) {
  const state = newState(overrides);
  addWorker(state, "w1", { maxConcurrent: 2 });
  return state;
}

/** The record of r1 answered 200 by w1 at 20 ms, every field but what differs. */
function r1Completed(
  differs: Partial<Extract<Effect, { kind: "requestFinished" }>>,
): Effect {
  return {
    kind: "requestFinished",
    requestId: "r1",
    route: "/v1/chat/completions",
    model: "m",
    outcome: "completed",
    status: 200,
    durationMs: 20,
    queueWaitMs: 0,
    firstByteMs: null,
    requeues: 0,
    tenant: "default",
    cacheReport: null,
    keyId: null,
    keyName: null,
    modelAsked: "m",
    modelServed: "m",
    workerName: "w1",
    usage: { prompt: null, completion: null, cached: null, estimated: false },
    ...differs,
  };
}

// ---- C14: non-streaming pass-through ----------------------------------------------

Deno.test("C14 status, headers and body reach the client unchanged", () => {
  const state = oneWorker();
  addRequest(state, "r1", { atMs: 10 });
  const headers = { "content-type": "application/json", "x-request-id": "abc" };
  const body = '{"choices":[{"message":{"content":"hi"}}],"usage":{}}';
  const effects = complete(state, "w1", "r1", {
    atMs: 30,
    status: 200,
    headers,
    body,
  });
  assert.deepEqual(actions(effects), [
    {
      kind: "respond",
      requestId: "r1",
      status: 200,
      headers,
      body,
      queueWaitMs: 0,
    },
    r1Completed({ firstByteMs: null }),
  ]);
  assert.equal(only(effects, "respond").body, body);
  assert.equal(state.requests.size, 0);
  assert.equal(worker(state, "w1").inFlight.size, 0);
});

Deno.test("C14 upstream 4xx and 5xx pass through unchanged, not collapsed into proxy errors", () => {
  for (const status of [400, 401, 404, 422, 429, 500, 503]) {
    const state = oneWorker();
    addRequest(state, "r1");
    const body = `{"error":{"message":"upstream ${status}"}}`;
    const headers = { "content-type": "application/json", "retry-after": "7" };
    const effects = complete(state, "w1", "r1", { status, headers, body });
    const res = only(effects, "respond");
    assert.deepEqual(res, {
      kind: "respond",
      requestId: "r1",
      status,
      headers,
      body,
      queueWaitMs: 0,
    });
    assert.equal(ofKind(effects, "respondError").length, 0);
    const fin = only(effects, "requestFinished");
    assert.equal(fin.outcome, "completed");
    assert.equal(fin.status, status);
    assert.equal(state.requests.size, 0);
  }
});

Deno.test("C14 a streaming request answered without chunks (upstream error) is passed through as a response", () => {
  const state = oneWorker();
  addRequest(state, "r1", { stream: true });
  const effects = complete(state, "w1", "r1", {
    status: 429,
    body: '{"error":"slow down"}',
  });
  assert.equal(ofKind(effects, "startStream").length, 0);
  const res = only(effects, "respond");
  assert.equal(res.status, 429);
  assert.equal(res.body, '{"error":"slow down"}');
});

// ---- C15: streaming --------------------------------------------------------------------

Deno.test("C15 chunks are written in order, as the exact same strings, with startStream once", () => {
  const state = oneWorker();
  addRequest(state, "r1", { stream: true, atMs: 0 });
  const chunks = [
    'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n',
    'data: {"choices":[{"delta":{"content":"lo é 😀"}}]}\n\n',
    ": keep-alive\n\n",
    "data: [DONE]\n\n",
  ];
  const all = chunks.flatMap((c, i) => chunk(state, "w1", "r1", c, 5 + i));
  const acts = actions(all);
  assert.deepEqual(acts.map((e) => e.kind), [
    "startStream",
    "writeChunk",
    "writeChunk",
    "writeChunk",
    "writeChunk",
  ]);
  const written = ofKind(all, "writeChunk");
  written.forEach((w, i) => {
    assert.equal(w.requestId, "r1");
    assert.equal(w.chunk, chunks[i]); // same string, byte for byte
  });
  const s = state.requests.get("r1")!.status;
  assert.equal(s.kind, "streaming");
  assert.ok(s.kind === "streaming");
  assert.equal(s.firstByteAtMs, 5);
  assert.equal(s.lastChunkAtMs, 8);
  assert.equal(s.charsStreamed, chunks.join("").length);
  // response_complete ends the stream and is the source of the final status.
  const end = complete(state, "w1", "r1", { atMs: 20, status: 200 });
  assert.deepEqual(actions(end), [
    { kind: "endStream", requestId: "r1", error: null },
    r1Completed({
      firstByteMs: 5,
      // Issue 26: no usage in the stream, so its two content deltas are the estimate.
      usage: { prompt: null, completion: 2, cached: null, estimated: true },
    }),
  ]);
  assert.equal(state.requests.size, 0);
  assert.equal(worker(state, "w1").inFlight.size, 0);
});

Deno.test("C15 nothing is written after the stream ended", () => {
  const state = oneWorker();
  addRequest(state, "r1", { stream: true });
  chunk(state, "w1", "r1", "data: 1\n\n");
  complete(state, "w1", "r1");
  const late = chunk(state, "w1", "r1", "data: 2\n\n");
  assert.deepEqual(actions(late), []);
  assert.equal(late.length, 1); // one debug log
  assert.deepEqual(actions(complete(state, "w1", "r1")), []);
});

Deno.test("C15 a worker that streams a non-streaming answer has it prepended to the final body", () => {
  const state = oneWorker();
  addRequest(state, "r1", { stream: false });
  assert.deepEqual(actions(chunk(state, "w1", "r1", '{"a":')), []);
  const effects = complete(state, "w1", "r1", { body: "1}" });
  const r = only(effects, "respond");
  assert.equal(piecesAsText(r.bodyPieces ?? [], r.body), '{"a":1}');
});

// ---- C16: stream ceiling ----------------------------------------------------------------

Deno.test("C16 an oversized stream ends with an SSE error and a cancel to the worker", () => {
  const state = oneWorker({ streamCharsMax: 10 });
  addRequest(state, "r1", { stream: true });
  chunk(state, "w1", "r1", "12345");
  assert.equal(
    ofKind(chunk(state, "w1", "r1", "67890"), "writeChunk").length,
    1,
  ); // exactly 10: fine
  const effects = chunk(state, "w1", "r1", "X");
  assert.equal(ofKind(effects, "writeChunk").length, 0);
  const [cancel] = sent(effects, "cancel", "w1");
  assert.deepEqual(cancel?.reason, { other: "stream_too_large" });
  assert.equal(cancel?.request_id, "r1");
  const end = only(effects, "endStream");
  assert.equal(end.requestId, "r1");
  assert.equal(end.error?.code, "stream_too_large");
  assert.equal(end.error?.status, 502);
  const fin = only(effects, "requestFinished");
  assert.equal(fin.outcome, "failed");
  // State: the request is gone; its slot stays reserved until the worker acks (C44).
  assert.equal(state.requests.has("r1"), false);
  assert.equal(worker(state, "w1").inFlight.size, 0);
  assert.equal(worker(state, "w1").cancelling.has("r1"), true);
  // Further chunks are dropped.
  assert.deepEqual(actions(chunk(state, "w1", "r1", "more")), []);
});

Deno.test("C16 a first chunk already over the ceiling opens and closes the stream with an error", () => {
  const state = oneWorker({ streamCharsMax: 3 });
  addRequest(state, "r1", { stream: true });
  const effects = chunk(state, "w1", "r1", "data: big\n\n");
  assert.deepEqual(
    actions(effects).map((e) =>
      e.kind === "sendToWorker" ? e.message.type : e.kind
    ),
    [
      "startStream",
      "cancel",
      "endStream",
      "requestFinished",
    ],
  );
  assert.equal(only(effects, "endStream").error?.code, "stream_too_large");
});

Deno.test("body-chunks-v1 a non-streaming answer in pieces over MAX_RESPONSE_BODY_BYTES fails 502 response_too_large with a cancel, not requeued", () => {
  const state = oneWorker({ responseBodyCharsMax: 3 });
  addRequest(state, "r1", { stream: false });
  const effects = chunk(state, "w1", "r1", "abcd");
  assert.equal(sent(effects, "cancel").length, 1);
  assert.equal(sent(effects, "request").length, 0);
  const error = only(effects, "respondError").error;
  assert.equal(error.status, 502);
  assert.equal(error.code, "response_too_large");
  assert.equal(state.requests.size, 0);
});

// ---- C32: a worker affects only its own requests ------------------------------------------

Deno.test("C32 chunk, complete and error frames for another worker's request are dropped, never delivered", () => {
  const state = newState();
  addWorker(state, "w1");
  addWorker(state, "w2");
  addRequest(state, "r1", { stream: true }); // goes to w1
  assert.equal(state.requests.get("r1")?.status.kind, "dispatched");
  assert.ok(worker(state, "w1").inFlight.has("r1"));
  const before = JSON.stringify([...state.requests.entries()]);
  const frames = [
    chunk(state, "w2", "r1", "data: evil\n\n"),
    complete(state, "w2", "r1", { status: 200, body: "evil" }),
    step(state, workerError("w2", "r1", "x", "evil")),
  ];
  for (const effects of frames) {
    assert.deepEqual(actions(effects), []);
    const warn = effects.find((e) =>
      e.kind === "log" && e.level === "warn" && /another worker/.test(e.message)
    );
    assert.ok(warn, JSON.stringify(effects));
  }
  assert.equal(JSON.stringify([...state.requests.entries()]), before);
  assert.equal(statusOf(state, "r1"), "dispatched");
  assert.equal(worker(state, "w2").inFlight.size, 0);
  // The owner still completes normally.
  assert.equal(
    ofKind(chunk(state, "w1", "r1", "data: ok\n\n"), "writeChunk")[0]?.chunk,
    "data: ok\n\n",
  );
});

Deno.test("C32 frames naming a queued request are dropped", () => {
  const state = newState();
  addWorker(state, "w1", { maxConcurrent: 1 });
  addRequest(state, "r1");
  addRequest(state, "r2"); // queued
  assert.deepEqual(actions(chunk(state, "w1", "r2", "x")), []);
  assert.deepEqual(actions(complete(state, "w1", "r2")), []);
  assert.equal(statusOf(state, "r2"), "queued");
});

Deno.test("C32 frames naming an unknown request are dropped as late frames", () => {
  const state = oneWorker();
  const effects = chunk(state, "w1", "nope", "x");
  assert.deepEqual(actions(effects), []);
  assert.ok(effects.some((e) => e.kind === "log" && e.level === "debug"));
});
