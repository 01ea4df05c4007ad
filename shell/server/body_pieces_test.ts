// Issue 24, item 2, the server shell's half: an answer a worker sent in pieces
// (body-chunks-v1) reaches the client exactly, with a Content-Length summed
// from the pieces' bytes, and a client that leaves mid-answer costs nothing
// more. Real server, real sockets, a scripted worker.
import assert from "node:assert/strict";
import {
  chatBody,
  postChat,
  registeredWorker,
  startTestServer,
  testConfig,
} from "./_test_helpers.ts";

Deno.test("issue 24.2 an answer in pieces reaches the client byte for byte, with its Content-Length in bytes (non-ASCII included)", async () => {
  const server = await startTestServer(testConfig());
  const w = await registeredWorker(server, { extensions: ["body-chunks-v1"] });
  try {
    const pending = postChat(server, chatBody("m1"));
    const req = await w.next("request");
    const pieces = ['{"content":"h\u00e9', "llo \u4e16\u754c ", "\ud83d\ude00"];
    for (const chunk of pieces) {
      w.send({ type: "response_chunk", request_id: req.request_id, chunk });
    }
    w.complete(req, 200, '"}');
    const res = await pending;
    const bytes = new Uint8Array(await res.arrayBuffer());
    const expected = new TextEncoder().encode(pieces.join("") + '"}');
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-length"), String(expected.length));
    assert.deepEqual(bytes, expected);
  } finally {
    await w.close();
    await server.close();
  }
});
