// chunk-bytes-v1 (issue 18) in the core: a bytes chunk from a worker that
// negotiated it streams like a text chunk, carried to writeChunk untouched.
import assert from "node:assert/strict";
import { decodeRecord, encodeRecord } from "../cluster/record.ts";
import { encodeBinaryChunkFrame, piecesAsText } from "../protocol/binary.ts";
import { EXTENSION_CHUNK_BYTES } from "../protocol/messages.ts";
import {
  addRequest,
  addWorker,
  complete,
  connect,
  logs,
  newState,
  ofKind,
  only,
  step,
  worker,
} from "../_testing.ts";
import type { Event } from "./event.ts";
import { eventFromBinaryFrame } from "./from_frame.ts";

const MAX = 1 << 20;
const bytes = (s: string) => new TextEncoder().encode(s);

function bytesChunk(
  workerId: string,
  requestId: string,
  chunk: Uint8Array,
  atMs = 0,
): Event {
  return eventFromBinaryFrame(
    workerId,
    atMs,
    encodeBinaryChunkFrame(requestId, chunk),
    MAX,
  );
}

function negotiated(over: Parameters<typeof newState>[0] = {}) {
  const state = newState(over);
  addWorker(state, "w1", { extensions: [EXTENSION_CHUNK_BYTES] });
  return state;
}

Deno.test("issue 18 register_ack lists chunk-bytes-v1 and the worker's record keeps it", () => {
  const state = newState();
  const effects = addWorker(state, "w1", {
    extensions: [EXTENSION_CHUNK_BYTES],
  });
  const ack = only(effects, "sendToWorker").message;
  assert.equal(ack.type, "register_ack");
  if (ack.type === "register_ack") {
    assert.ok(ack.extensions?.includes(EXTENSION_CHUNK_BYTES));
  }
  assert.deepEqual(worker(state, "w1").extensions, [EXTENSION_CHUNK_BYTES]);
});

Deno.test("issue 18 the first bytes chunk starts the stream; writeChunk carries the frame's very bytes", () => {
  const state = negotiated();
  addRequest(state, "r1", { stream: true });
  const payload = bytes("data: h\u00e9\n\n");
  const event = bytesChunk("w1", "r1", payload);
  const effects = step(state, event);
  assert.deepEqual(effects.map((e) => e.kind), ["startStream", "writeChunk"]);
  const write = only(effects, "writeChunk");
  // The same object the event carried: a subarray of the frame, no copy.
  assert.equal(write.chunk, (event as { chunk: Uint8Array }).chunk);
  assert.deepEqual(write.chunk, payload);
  const s = state.requests.get("r1")!.status;
  assert.equal(s.kind === "streaming" && s.charsStreamed, payload.length);
  const more = step(state, bytesChunk("w1", "r1", bytes("data: x\n\n"), 5));
  assert.deepEqual(more.map((e) => e.kind), ["writeChunk"]);
  assert.equal(s.kind === "streaming" && s.charsStreamed, payload.length + 9);
});

Deno.test("issue 18 the stream limit counts a bytes chunk's bytes (never fewer than its characters)", () => {
  const state = negotiated({ streamCharsMax: 10 });
  addRequest(state, "r1", { stream: true });
  // 6 characters, 12 bytes: under the limit as text, over it as bytes.
  const effects = step(
    state,
    bytesChunk("w1", "r1", bytes("\u00e9".repeat(6))),
  );
  const end = only(effects, "endStream");
  assert.equal(end.error?.code, "stream_too_large");
  assert.equal(ofKind(effects, "writeChunk").length, 0);
});

Deno.test("issue 18 a bytes chunk for a request the worker does not hold is dropped as any late frame", () => {
  const state = negotiated();
  const effects = step(state, bytesChunk("w1", "ghost", bytes("x")));
  assert.equal(logs(effects, "late frame dropped").length, 1);
  assert.equal(ofKind(effects, "closeWorker").length, 0);
  assert.ok(state.workers.has("w1"));
});

Deno.test("C41 a bytes chunk from a socket that has not registered closes it with 1002", () => {
  const state = newState();
  connect(state, "w1", { atMs: 0, clientIp: "1.2.3.4" });
  const effects = step(state, bytesChunk("w1", "r1", bytes("x")));
  assert.equal(only(effects, "closeWorker").code, 1002);
  assert.equal(state.pending.size, 0);
});

Deno.test("issue 18 a bytes chunk for a non-streaming request (not our worker's habit) is passed on as bytes before the body", () => {
  const state = negotiated();
  addRequest(state, "r1", { stream: false });
  assert.deepEqual(
    step(state, bytesChunk("w1", "r1", bytes('{"a":"h\u00e9'))).filter((e) =>
      e.kind !== "log"
    ),
    [],
  );
  const effects = complete(state, "w1", "r1", { status: 200, body: '"}' });
  const r = only(effects, "respond");
  assert.ok(r.bodyPieces?.[0] instanceof Uint8Array, "kept as bytes");
  assert.equal(piecesAsText(r.bodyPieces ?? [], r.body), '{"a":"h\u00e9"}');
});

Deno.test("issue 18 the cluster log carries a bytes chunk as base64: every replica gets the very bytes", () => {
  const payload = new Uint8Array([0x64, 0xc3, 0xa9, 0xff, 0x00, 0x0a]);
  const text = encodeRecord({
    kind: "events",
    instance: "i-1",
    seq: 1,
    appliedMs: null,
    events: [
      bytesChunk("w1", "r1", payload),
      {
        kind: "chunkReceived",
        atMs: 0,
        workerId: "w1",
        requestId: "r2",
        chunk: "text",
      },
    ],
  });
  assert.ok(text.includes('"b64"'));
  const back = decodeRecord(text);
  assert.equal(back.kind, "events");
  if (back.kind !== "events") return;
  const [a, t] = back.events;
  assert.ok(a?.kind === "chunkReceived" && a.chunk instanceof Uint8Array);
  assert.deepEqual(a.chunk, payload);
  assert.ok(t?.kind === "chunkReceived" && t.chunk === "text");
});
