import assert from "node:assert/strict";
import {
  chatBody,
  postChat,
  registeredWorker,
  startedStream,
  testConfig,
  waitFor,
  withTestServer,
} from "./_test_helpers.ts";

async function queueDepth(url: string): Promise<number> {
  return (await (await fetch(`${url}/health`)).json()).queue_depth;
}

Deno.test("C18 a queued request whose client aborts is removed at once, no cancel sent", async () => {
  await withTestServer(testConfig(), async (server) => {
    const w = await registeredWorker(server, { max_concurrent: 1 });
    const busy = postChat(server, chatBody());
    const r1 = await w.next("request");
    const abort = new AbortController();
    const queued = postChat(server, chatBody(), {
      signal: abort.signal,
    }).catch((e) => e);
    await waitFor(
      "the second request to queue",
      async () => (await queueDepth(server.url)) === 1,
    );
    abort.abort();
    await queued;
    await waitFor(
      "the queue to empty",
      async () => (await queueDepth(server.url)) === 0,
    );
    w.complete(r1, 200, "");
    await (await busy).text();
    assert.equal(w.frames.filter((f) => f.type === "request").length, 1);
    assert.equal(w.frames.filter((f) => f.type === "cancel").length, 0);
    await w.close();
  });
});

Deno.test("C18 C46 a client gone before the first byte, body sent in a separate write, cancels on the worker", async () => {
  await withTestServer(testConfig(), async (server) => {
    const w = await registeredWorker(server);
    const conn = await Deno.connect({
      hostname: "127.0.0.1",
      port: server.port,
    });
    const body = chatBody();
    const head = `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n` +
      `content-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`;
    await conn.write(new TextEncoder().encode(head));
    await new Promise((r) => setTimeout(r, 30)); // a separate TCP write, as SDKs do
    await conn.write(new TextEncoder().encode(body));
    const req = await w.next("request");
    conn.close();
    const cancel = await w.next("cancel");
    assert.equal(cancel.request_id, req.request_id);
    assert.equal(cancel.reason, "client_disconnect");
    await w.close();
  });
});

Deno.test("C18 a client aborting mid-stream sends cancel client_disconnect to the worker", async () => {
  await withTestServer(testConfig(), async (server) => {
    const w = await registeredWorker(server);
    const abort = new AbortController();
    const pending = postChat(server, chatBody("m1", true), {
      signal: abort.signal,
    });
    const req = await w.next("request");
    w.send({
      type: "response_chunk",
      request_id: req.request_id,
      chunk: "data: 1\n\n",
    });
    const res = await pending;
    const reader = res.body!.getReader();
    await reader.read();
    abort.abort();
    await reader.cancel().catch(() => {});
    const cancel = await w.next("cancel");
    assert.equal(cancel.request_id, req.request_id);
    assert.equal(cancel.reason, "client_disconnect");
    // C20: a late chunk after the cancel is dropped without harm.
    w.send({
      type: "response_chunk",
      request_id: req.request_id,
      chunk: "data: late\n\n",
    });
    w.complete(req, 499, "");
    const health = await (await fetch(`${server.url}/health`)).json();
    assert.equal(health.workers_connected, 1);
    await w.close();
  });
});

Deno.test("C24 a stream cut by its worker's death ends with an SSE error event, not a clean end", async () => {
  await withTestServer(testConfig(), async (server) => {
    const a = await registeredWorker(server);
    const { res } = await startedStream(server, a);
    await a.close();
    const text = await res.text();
    assert.ok(text.startsWith("data: 1\n\n"));
    assert.match(text, /data: \{"error":\{"message":"worker disconnected/);
  });
});
