// chunk-bytes-v1 (issue 18) in the worker core: binary chunk frames only to a
// server that acked the extension.
import assert from "node:assert/strict";
import { step, type WorkerState } from "./mod.ts";
import { streamingWith } from "./_testing.ts";

function streaming(ack: string[] | null): WorkerState {
  return streamingWith(ack, "/v1/chat/completions");
}

/** The backend's `chunk` read for `requestId`: what the worker core sends for it. */
function chunkRead(
  s: WorkerState,
  requestId: string,
  chunk: string | Uint8Array,
) {
  return step(s, { atMs: 0, kind: "chunkRead", requestId, chunk });
}

const payload = new TextEncoder().encode("data: h\u00e9\n\n");

Deno.test("issue 18 a stream's bytes leave as a binary chunk frame when the server acked chunk-bytes-v1", () => {
  const s = streaming(["drain-v1", "chunk-bytes-v1"]);
  const actions = chunkRead(s, "r1", payload);
  assert.deepEqual(actions, [
    { kind: "sendChunkBytes", requestId: "r1", chunk: payload },
  ]);
});

Deno.test("issue 18 an original server (no extensions in its ack) gets a response_chunk text frame, never a binary one", () => {
  for (const ack of [null, [], ["drain-v1"]]) {
    const s = streaming(ack);
    const actions = chunkRead(s, "r1", payload);
    assert.deepEqual(actions, [{
      kind: "send",
      message: {
        type: "response_chunk",
        request_id: "r1",
        chunk: "data: h\u00e9\n\n",
      },
    }], JSON.stringify(ack));
  }
});

Deno.test("issue 18 text reads stay text frames, and nothing leaves for a request no longer in flight", () => {
  const s = streaming(["chunk-bytes-v1"]);
  assert.equal(
    chunkRead(s, "r1", "data: x\n\n")[0]
      ?.kind,
    "send",
  );
  assert.deepEqual(
    chunkRead(s, "gone", payload),
    [],
  );
});
