// stream-head-v1 in the worker core (issue 25, C108): a stream that is not
// server-sent events sends its head first, only to a server that acked it.
import assert from "node:assert/strict";
import { step, type WorkerState } from "./mod.ts";
import { streamNeedsHead } from "./stream_head.ts";
import { streamingWith } from "./_testing.ts";

function streaming(ack: string[] | null): WorkerState {
  return streamingWith(ack, "/api/chat");
}

/** The backend's 200 head read for `requestId`: what the worker core sends for it. */
function headRead(
  s: WorkerState,
  requestId: string,
  headers: Record<string, string>,
) {
  return step(s, {
    atMs: 0,
    kind: "headRead",
    requestId,
    status: 200,
    headers,
  });
}

const NDJSON = { "content-type": "application/x-ndjson" };

Deno.test("C108 a non-SSE stream's head leaves as one response_head when the server acked stream-head-v1", () => {
  const s = streaming(["chunk-bytes-v1", "stream-head-v1"]);
  const actions = headRead(s, "r1", NDJSON);
  assert.deepEqual(actions, [{
    kind: "send",
    message: {
      type: "response_head",
      request_id: "r1",
      status_code: 200,
      headers: NDJSON,
    },
  }]);
});

Deno.test("C108 no response_head to a server without the extension, for SSE, or for a request not in flight", () => {
  for (const ack of [null, [], ["chunk-bytes-v1"]]) {
    const s = streaming(ack);
    assert.deepEqual(
      headRead(s, "r1", NDJSON),
      [],
    );
  }
  const s = streaming(["stream-head-v1"]);
  assert.deepEqual(
    headRead(s, "r1", { "content-type": "text/event-stream; charset=utf-8" }),
    [],
  );
  assert.deepEqual(
    headRead(s, "gone", NDJSON),
    [],
  );
});

Deno.test("C108 which streams need their head: any named content type but SSE", () => {
  assert.equal(streamNeedsHead(undefined), false);
  assert.equal(streamNeedsHead("text/event-stream"), false);
  assert.equal(streamNeedsHead(" Text/Event-Stream;charset=utf-8"), false);
  assert.equal(streamNeedsHead("application/x-ndjson"), true);
  assert.equal(streamNeedsHead("audio/mpeg"), true);
  assert.equal(streamNeedsHead("text/plain"), true);
});
