import assert from "node:assert/strict";
import {
  chatBody,
  registeredWorker,
  startTestServer,
  testConfig,
  waitFor,
} from "./_test_helpers.ts";

Deno.test("a client that stops reading a stream is cut at the buffer cap and its worker gets cancel", async () => {
  const server = await startTestServer(
    testConfig({}, { clientBufferBytes: 64 * 1024 }),
  );
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: server.port });
  try {
    const w = await registeredWorker(server);
    const body = chatBody("m1", true);
    await conn.write(new TextEncoder().encode(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n` +
        `content-length: ${body.length}\r\n\r\n${body}`,
    ));
    const req = await w.next("request");
    // The client never reads: once kernel buffers are full, the server's own buffer
    // grows past the cap and the request is ended instead of buffering without bound.
    const chunk = `data: ${"x".repeat(64 * 1024)}\n\n`;
    let sent = 0;
    await waitFor("the cancel for the stalled client", () => {
      if (w.frames.some((f) => f.type === "cancel")) return true;
      if (sent < 2000) {
        for (let i = 0; i < 20; i++) {
          w.send({ type: "response_chunk", request_id: req.request_id, chunk });
        }
        sent += 20;
      }
      return false;
    }, 20_000);
    const cancel = await w.next("cancel");
    assert.equal(cancel.request_id, req.request_id);
    assert.deepEqual(cancel.reason, { other: "client_too_slow" });
    // Nowhere near everything was buffered: the cap, not the stream, bounds memory.
    assert.ok(sent < 2000, `sent ${sent} chunks of 64 KiB before the cut`);
    w.complete(req, 499, "");
    await w.close();
  } finally {
    conn.close();
    await server.close();
  }
});
