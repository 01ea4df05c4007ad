// chunk-bytes-v1 (issue 18) in the worker core: binary chunk frames only to a
// server that acked the extension.
import assert from "node:assert/strict";
import { step, type WorkerState } from "./mod.ts";
import { frame, registeredWith } from "./_testing.ts";

/** Registered with a server that acked `ack`, with one streaming request on the way. */
function streaming(ack: string[] | null): WorkerState {
  const s = registeredWith(ack);
  step(
    s,
    frame({
      type: "request",
      request_id: "r1",
      model: "m",
      endpoint_path: "/v1/chat/completions",
      is_streaming: true,
      body: "{}",
    }),
  );
  return s;
}

const payload = new TextEncoder().encode("data: h\u00e9\n\n");

Deno.test("issue 18 a stream's bytes leave as a binary chunk frame when the server acked chunk-bytes-v1", () => {
  const s = streaming(["drain-v1", "chunk-bytes-v1"]);
  const actions = step(s, {
    atMs: 0,
    kind: "chunkRead",
    requestId: "r1",
    chunk: payload,
  });
  assert.deepEqual(actions, [
    { kind: "sendChunkBytes", requestId: "r1", chunk: payload },
  ]);
});

Deno.test("issue 18 an original server (no extensions in its ack) gets a response_chunk text frame, never a binary one", () => {
  for (const ack of [null, [], ["drain-v1"]]) {
    const s = streaming(ack);
    const actions = step(s, {
      atMs: 0,
      kind: "chunkRead",
      requestId: "r1",
      chunk: payload,
    });
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
    step(s, {
      atMs: 0,
      kind: "chunkRead",
      requestId: "r1",
      chunk: "data: x\n\n",
    })[0]
      ?.kind,
    "send",
  );
  assert.deepEqual(
    step(s, { atMs: 0, kind: "chunkRead", requestId: "gone", chunk: payload }),
    [],
  );
});
