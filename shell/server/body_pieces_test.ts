// Issue 24, item 2, the server shell's half: an answer a worker sent in pieces
// (body-chunks-v1) reaches the client exactly, with a Content-Length summed
// from the pieces' bytes, and a client that leaves mid-answer costs nothing
// more. Real server, real sockets, a scripted worker.
import assert from "node:assert/strict";
import {
  chatBody,
  type Frame,
  postChat,
  registeredWorker,
  startTestServer,
  testConfig,
  type TestServer,
  type TestWorker,
  waitFor,
  withRegisteredWorker,
} from "./_test_helpers.ts";
import { readUntilEnd } from "./_raw_socket.ts";

/** Written out or let go: the answer's bytes leave the fleet's budget. */
function budgetGivenBack(server: TestServer): Promise<void> {
  return waitFor(
    "the budget to be given back",
    () => server.runtime.state.bodyBytesBuffered === 0,
  );
}

/**
 * `w` answers `req` with 16 pieces of 1 MiB, then its completion: far more
 * than the sockets hold while nobody reads.
 */
function answerSixteenMiB(w: TestWorker, req: Frame): void {
  const piece = "x".repeat(1024 * 1024);
  for (let i = 0; i < 16; i++) {
    w.send({
      type: "response_chunk",
      request_id: req.request_id,
      chunk: piece,
    });
  }
  w.complete(req, 200, "");
}

Deno.test("issue 24.2 an answer in pieces reaches the client byte for byte, with its Content-Length in bytes (non-ASCII included)", async () => {
  await withRegisteredWorker(
    startTestServer(testConfig()),
    { extensions: ["body-chunks-v1"] },
    async (server, w) => {
      const pending = postChat(server, chatBody("m1"));
      const req = await w.next("request");
      const pieces = [
        '{"content":"h\u00e9',
        "llo \u4e16\u754c ",
        "\ud83d\ude00",
      ];
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
      await budgetGivenBack(server);
    },
  );
});

Deno.test("issue 24.2 a client that leaves in the middle of an answer in pieces gives its bytes back to the budget at once", async () => {
  await withRegisteredWorker(
    startTestServer(testConfig()),
    { extensions: ["body-chunks-v1"] },
    async (server, w) => {
      const abort = new AbortController();
      const pending = postChat(server, chatBody("m1"), {
        signal: abort.signal,
      });
      const req = await w.next("request");
      answerSixteenMiB(w, req);
      const res = await pending;
      assert.equal(res.status, 200);
      await waitFor(
        "the answer to be handed to the shell",
        () => server.runtime.state.bodiesSending.size === 1,
      );
      abort.abort();
      await res.body?.cancel().catch(() => {});
      await budgetGivenBack(server);
    },
  );
});

Deno.test("issue 33.3 a client that never reads its answer in pieces is cut after CLIENT_WRITE_TIMEOUT_SECS, and only then are its bytes given back", async () => {
  const server = await startTestServer(
    testConfig({ clientWriteTimeoutMs: 1_000, requestTimeoutMs: 600_000 }),
  );
  const w = await registeredWorker(server, { extensions: ["body-chunks-v1"] });
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: server.port });
  try {
    const body = chatBody("m1");
    await conn.write(new TextEncoder().encode(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n` +
        `content-length: ${body.length}\r\n\r\n${body}`,
    ));
    const req = await w.next("request");
    answerSixteenMiB(w, req);
    await waitFor(
      "the answer to be handed to the shell",
      () => server.runtime.state.bodiesSending.size === 1,
    );
    // Whatever the sockets took was reported written; the rest stays counted
    // while the connection holds it.
    const held = server.runtime.state.bodyBytesBuffered;
    assert.ok(held > 0, "bytes still held for the idle client");
    await waitFor(
      "the idle client to be cut and its bytes given back",
      () => server.runtime.state.bodiesSending.size === 0,
      20_000,
    );
    assert.equal(server.runtime.state.bodyBytesBuffered, 0);
    assert.equal(server.runtime.state.bodyBytesByTenant.size, 0);
    // The client's connection is closed, its answer short of the whole.
    let got = 0;
    await readUntilEnd(conn, (bytes) => got += bytes.length);
    assert.ok(got < 16 * 1024 * 1024, `the idle client got ${got} bytes`);
  } finally {
    conn.close();
    await w.close();
    await server.close();
  }
});
