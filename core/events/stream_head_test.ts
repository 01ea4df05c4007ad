// stream-head-v1 (issue 25, C108): a streamed answer's head from our worker
// opens the client's response instead of the relay's fixed SSE head, once per
// stream; the original dialect keeps the SSE head.
import assert from "node:assert/strict";
import {
  type ClusterRecord,
  decodeRecord,
  encodeRecord,
} from "../cluster/record.ts";
import { decodeWorkerFrame } from "../protocol/decode.ts";
import { encodeFrame } from "../protocol/encode.ts";
import {
  EXTENSION_STREAM_HEAD,
  SUPPORTED_EXTENSIONS,
} from "../protocol/messages.ts";
import {
  addRequest,
  addWorker,
  chunk,
  disconnect,
  logs,
  newState,
  ofKind,
  only,
  sent,
  step,
} from "../_testing.ts";
import type { Event } from "./event.ts";
import { eventFromFrame } from "./from_frame.ts";

const NDJSON = { "content-type": "application/x-ndjson" };

function head(
  workerId: string,
  requestId: string,
  headers: Record<string, string> = NDJSON,
  statusCode = 200,
): Event {
  return eventFromFrame(
    workerId,
    0,
    encodeFrame({
      type: "response_head",
      request_id: requestId,
      status_code: statusCode,
      headers,
    }),
    1 << 20,
  );
}

function negotiated(ids = ["w1"]) {
  const state = newState();
  for (const id of ids) {
    addWorker(state, id, { extensions: [EXTENSION_STREAM_HEAD] });
  }
  return state;
}

Deno.test("C108 the server acks stream-head-v1 and response_head decodes as sent", () => {
  assert.ok(SUPPORTED_EXTENSIONS.includes(EXTENSION_STREAM_HEAD));
  const frame = encodeFrame({
    type: "response_head",
    request_id: "r1",
    status_code: 206,
    headers: { "content-type": "audio/mpeg", "x-a": "1" },
  });
  const d = decodeWorkerFrame(frame, 1 << 20);
  assert.ok(d.ok);
  assert.deepEqual(d.ok && d.message, JSON.parse(frame));
  // Headers are required, and strings.
  const bad = decodeWorkerFrame(
    '{"type":"response_head","request_id":"r1","status_code":200,"headers":{"a":1}}',
    1 << 20,
  );
  assert.equal(bad.ok, false);
  assert.deepEqual(head("w1", "r1"), {
    kind: "headReceived",
    atMs: 0,
    workerId: "w1",
    requestId: "r1",
    statusCode: 200,
    headers: NDJSON,
  });
});

Deno.test("C108 the first chunk's startStream carries the head; later chunks carry nothing more", () => {
  const state = negotiated();
  addRequest(state, "r1", { stream: true, endpointPath: "/api/chat" });
  assert.deepEqual(step(state, head("w1", "r1")), []);
  const first = chunk(state, "w1", "r1", '{"a":1}\n');
  assert.deepEqual(first.map((e) => e.kind), ["startStream", "writeChunk"]);
  assert.deepEqual(only(first, "startStream").head, {
    status: 200,
    headers: NDJSON,
  });
  const next = chunk(state, "w1", "r1", '{"a":2}\n');
  assert.deepEqual(next.map((e) => e.kind), ["writeChunk"]);
});

Deno.test("C108 without a head the stream starts with the relay's SSE head, as before", () => {
  const state = negotiated();
  addRequest(state, "r1", { stream: true });
  const first = chunk(state, "w1", "r1", "data: x\n\n");
  assert.equal(only(first, "startStream").head, undefined);
});

Deno.test("C108 a requeue drops the first worker's head with its dispatch", () => {
  const state = negotiated(["w1", "w2"]);
  addRequest(state, "r1", { stream: true });
  const firstWorker = state.requests.get("r1")!.status;
  assert.equal(firstWorker.kind, "dispatched");
  const w = firstWorker.kind === "dispatched" ? firstWorker.workerId : "";
  step(state, head(w, "r1"));
  const again = disconnect(state, w);
  const to = sent(again, "request")[0]!;
  assert.ok(to !== undefined);
  const s = state.requests.get("r1")!.status;
  assert.equal(s.kind === "dispatched" && s.head, undefined);
  const other = s.kind === "dispatched" ? s.workerId : "";
  const first = chunk(state, other, "r1", "data: x\n\n");
  assert.equal(only(first, "startStream").head, undefined);
});

Deno.test("C108 response_head from a worker that did not negotiate it is a protocol error", () => {
  const state = newState();
  addWorker(state, "w1");
  addRequest(state, "r1", { stream: true });
  const effects = step(state, head("w1", "r1"));
  assert.equal(ofKind(effects, "closeWorker").length, 1);
});

Deno.test("C108 a head for a non-streaming request, a started stream or another's request changes nothing", () => {
  const state = negotiated(["w1"]);
  addRequest(state, "r1", { stream: false });
  assert.equal(
    logs(
      step(state, head("w1", "r1")),
      "response_head ignored: no stream waiting for its head",
    ).length,
    1,
  );
  addRequest(state, "r2", { stream: true });
  chunk(state, "w1", "r2", "data: x\n\n");
  step(state, head("w1", "r2"));
  assert.equal(state.requests.get("r2")!.status.kind, "streaming");
  const late = step(state, head("w1", "nobody"));
  assert.equal(logs(late, "late frame dropped").length, 1);
});

Deno.test("C108 the head event survives the cluster log's record encoding", () => {
  const e = head("w1", "r1", { "content-type": "audio/mpeg" }, 200);
  const record: ClusterRecord = {
    kind: "events",
    instance: "i-1",
    seq: 1,
    appliedMs: null,
    events: [e],
  };
  assert.deepEqual(decodeRecord(encodeRecord(record)), record);
});
