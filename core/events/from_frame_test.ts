import assert from "node:assert/strict";
import {
  actions,
  addWorker,
  chunk,
  connect,
  newState,
  only,
  routed,
  step,
  worker,
} from "../_testing.ts";
import { encodeBinaryChunkFrame } from "../protocol/binary.ts";
import { eventFromBinaryFrame, eventFromFrame } from "./from_frame.ts";

const MAX = 1024;

/** Two workers, each holding one dispatched request (r1 on w1, r2 on w2). */
function twoBusyWorkers() {
  const state = newState({ frameCharsMax: MAX });
  addWorker(state, "w1", { models: ["m"], maxConcurrent: 1 });
  addWorker(state, "w2", { models: ["m"], maxConcurrent: 1 });
  const d1 = routed(state, "r1", { stream: true });
  const d2 = routed(state, "r2", { stream: true });
  assert.deepEqual([...d1, ...d2], [["r1", "w1"], ["r2", "w2"]]);
  chunk(state, "w2", "r2", "data: a\n\n");
  return state;
}

Deno.test("C33 garbage, unknown, oversized and binary frames close only the offender with 1002, without throwing", () => {
  const frames: [string, () => ReturnType<typeof eventFromFrame>][] = [
    ["garbage", () => eventFromFrame("w1", 10, "\u0000\u0001 not json", MAX)],
    ["array", () => eventFromFrame("w1", 10, "[]", MAX)],
    ["unknown type", () => eventFromFrame("w1", 10, '{"type":"hello"}', MAX)],
    [
      "bad fields",
      () => eventFromFrame("w1", 10, '{"type":"pong","current_load":"x"}', MAX),
    ],
    [
      "oversized",
      () =>
        eventFromFrame(
          "w1",
          10,
          // request_id after the payload: the frame cannot be attributed.
          `{"type":"response_chunk","chunk":"${
            "x".repeat(MAX)
          }","request_id":"r1"}`,
          MAX,
        ),
    ],
    [
      "binary of an unknown kind",
      () =>
        eventFromBinaryFrame("w1", 10, new Uint8Array([0xff, 1, 0x72]), MAX),
    ],
  ];
  for (const [label, make] of frames) {
    const state = twoBusyWorkers();
    const event = make();
    assert.equal(event.kind, "workerFrameInvalid", label);
    let effects: ReturnType<typeof step> = [];
    assert.doesNotThrow(() => {
      effects = step(state, event);
    }, label);
    const close = only(effects, "closeWorker");
    assert.equal(close.workerId, "w1", label);
    assert.equal(close.code, 1002, label);
    assert.match(close.reason, /^protocol error: /, label);
    // Only the offender is affected: w2 and its stream are untouched.
    assert.equal(state.workers.has("w1"), false, label);
    assert.deepEqual([...worker(state, "w2").inFlight], ["r2"], label);
    assert.equal(state.requests.get("r2")?.status.kind, "streaming", label);
    for (const e of effects) {
      if ("workerId" in e) assert.equal(e.workerId, "w1", label);
      if ("requestId" in e) assert.equal(e.requestId, "r1", label);
    }
    // The offender's request was not started, so it goes back to the queue (C22).
    assert.equal(state.requests.get("r1")?.status.kind, "queued", label);
  }
});

Deno.test("C41 a binary frame from a worker that did not negotiate chunk-bytes-v1 is a protocol error naming the cause", () => {
  const state = newState();
  addWorker(state, "w1");
  const frame = encodeBinaryChunkFrame("r1", new TextEncoder().encode("hi"));
  const effects = step(state, eventFromBinaryFrame("w1", 1, frame, MAX));
  const close = only(effects, "closeWorker");
  assert.equal(close.code, 1002);
  assert.match(close.reason, /binary/);
  assert.equal(state.workers.size, 0);
});

Deno.test("C33 a garbage frame from a socket that has not registered closes it with 1002", () => {
  const state = newState();
  connect(state, "w1", { atMs: 0, clientIp: "1.2.3.4" });
  const effects = step(state, eventFromFrame("w1", 1, "{oops", MAX));
  assert.equal(only(effects, "closeWorker").code, 1002);
  assert.equal(state.pending.size, 0);
  // A frame for a socket the core no longer knows does nothing.
  assert.deepEqual(
    actions(step(state, eventFromFrame("w1", 2, "{oops", MAX))),
    [],
  );
});

Deno.test("C40 error frame maps to an event with request_id optional and a default code", () => {
  assert.deepEqual(
    eventFromFrame("w1", 7, '{"type":"error","message":"boom"}', MAX),
    {
      kind: "workerErrorReceived",
      atMs: 7,
      workerId: "w1",
      requestId: null,
      code: "worker_error",
      message: "boom",
    },
  );
  assert.deepEqual(
    eventFromFrame(
      "w1",
      7,
      '{"type":"error","request_id":"r1","code":"upstream","message":"x","extra":1}',
      MAX,
    ),
    {
      kind: "workerErrorReceived",
      atMs: 7,
      workerId: "w1",
      requestId: "r1",
      code: "upstream",
      message: "x",
    },
  );
});

Deno.test("C40 frames with absent optional fields map to defaults", () => {
  assert.deepEqual(
    eventFromFrame(
      "w1",
      1,
      '{"type":"response_complete","request_id":"r1","status_code":204}',
      MAX,
    ),
    {
      kind: "completeReceived",
      atMs: 1,
      workerId: "w1",
      requestId: "r1",
      statusCode: 204,
      headers: {},
      body: "",
      tokenCounts: null,
    },
  );
  assert.deepEqual(eventFromFrame("w1", 1, '{"type":"pong"}', MAX), {
    kind: "pongReceived",
    atMs: 1,
    workerId: "w1",
    currentLoad: null,
  });
  assert.deepEqual(
    eventFromFrame(
      "w1",
      1,
      '{"type":"register","worker_name":"n","models":["a"],"max_concurrent":2}',
      MAX,
    ),
    {
      kind: "registerReceived",
      atMs: 1,
      workerId: "w1",
      workerName: "n",
      models: ["a"],
      maxConcurrent: 2,
      protocolVersion: null,
      currentLoad: 0,
    },
  );
  assert.deepEqual(
    eventFromFrame("w1", 1, '{"type":"models_update","models":[]}', MAX),
    {
      kind: "modelsUpdateReceived",
      atMs: 1,
      workerId: "w1",
      models: [],
      currentLoad: null,
    },
  );
});

Deno.test("C15 a response_chunk frame carries the chunk text unchanged into the event", () => {
  const text =
    'data: {"choices":[{"delta":{"content":"h\\u00e9 \\ud83d\\ude00"}}]}\n\n';
  const event = eventFromFrame(
    "w1",
    3,
    JSON.stringify({ type: "response_chunk", request_id: "r1", chunk: text }),
    MAX,
  );
  assert.deepEqual(event, {
    kind: "chunkReceived",
    atMs: 3,
    workerId: "w1",
    requestId: "r1",
    chunk: text,
  });
});
