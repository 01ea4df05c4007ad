// chunk-bytes-v1 (issue 18) in the worker core: binary chunk frames only to a
// server that acked the extension.
import assert from "node:assert/strict";
import { initialWorkerState, step, type WorkerState } from "./decide.ts";

function registered(ack: string[] | null): WorkerState {
  const s = initialWorkerState({
    workerName: "w",
    maxConcurrent: 2,
    models: ["m"],
    modelsDiscovered: false,
    drainTimeoutSecs: 30,
    onServerShutdown: "exit",
  });
  step(s, { kind: "socketOpened" });
  step(s, {
    kind: "frameReceived",
    text: JSON.stringify({
      type: "register_ack",
      worker_id: "w1",
      models: ["m"],
      ...(ack === null ? {} : { extensions: ack }),
    }),
  });
  step(s, {
    kind: "frameReceived",
    text: JSON.stringify({
      type: "request",
      request_id: "r1",
      model: "m",
      endpoint_path: "/v1/chat/completions",
      is_streaming: true,
      body: "{}",
    }),
  });
  return s;
}

const payload = new TextEncoder().encode("data: h\u00e9\n\n");

Deno.test("issue 18 a stream's bytes leave as a binary chunk frame when the server acked chunk-bytes-v1", () => {
  const s = registered(["drain-v1", "chunk-bytes-v1"]);
  const actions = step(s, {
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
    const s = registered(ack);
    const actions = step(s, {
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
  const s = registered(["chunk-bytes-v1"]);
  assert.equal(
    step(s, { kind: "chunkRead", requestId: "r1", chunk: "data: x\n\n" })[0]
      ?.kind,
    "send",
  );
  assert.deepEqual(
    step(s, { kind: "chunkRead", requestId: "gone", chunk: payload }),
    [],
  );
});
