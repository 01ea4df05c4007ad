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
  waitFor,
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
    // Written out: the bytes leave the fleet's budget (responseSent).
    await waitFor(
      "the budget to be given back",
      () => server.runtime.state.bodyBytesBuffered === 0,
    );
  } finally {
    await w.close();
    await server.close();
  }
});

Deno.test("issue 24.2 a client that leaves in the middle of an answer in pieces gives its bytes back to the budget at once", async () => {
  const server = await startTestServer(testConfig());
  const w = await registeredWorker(server, { extensions: ["body-chunks-v1"] });
  try {
    const abort = new AbortController();
    const pending = fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      body: chatBody("m1"),
      signal: abort.signal,
    });
    const req = await w.next("request");
    // 16 pieces of 1 MiB: far more than the sockets hold while nobody reads.
    const piece = "x".repeat(1024 * 1024);
    for (let i = 0; i < 16; i++) {
      w.send({
        type: "response_chunk",
        request_id: req.request_id,
        chunk: piece,
      });
    }
    w.complete(req, 200, "");
    const res = await pending;
    assert.equal(res.status, 200);
    await waitFor(
      "the answer to be handed to the shell",
      () => server.runtime.state.bodiesSending.size === 1,
    );
    abort.abort();
    await res.body?.cancel().catch(() => {});
    await waitFor(
      "the budget to be given back",
      () => server.runtime.state.bodyBytesBuffered === 0,
    );
  } finally {
    await w.close();
    await server.close();
  }
});
