import assert from "node:assert/strict";
import {
  chatBody,
  connectWorker,
  overfullQueue,
  postChat,
  registeredWorker,
  testConfig,
  type TestServer,
  withTestServer,
} from "./_test_helpers.ts";

/** A worker that registers with `protocolVersion`: how the server closed its socket. */
async function registerClosed(
  server: TestServer,
  protocolVersion: string,
): Promise<CloseEvent> {
  const bad = await connectWorker(server);
  bad.send({
    type: "register",
    worker_name: "x",
    models: ["m1"],
    max_concurrent: 1,
    protocol_version: protocolVersion,
  });
  return await bad.closed;
}

Deno.test("C3 a worker registers and gets register_ack with its id, models and version", async () => {
  await withTestServer(testConfig(), async (server) => {
    const w = await registeredWorker(server, {
      models: [" m1 ", "m2", "m1", ""],
    });
    assert.equal(typeof w.ack.worker_id, "string");
    assert.deepEqual(w.ack.models, ["m1", "m2"]);
    assert.equal(w.ack.protocol_version, "2026-04-bridge-v1");
    assert.ok((w.ack.warnings as string[]).length >= 2);
    const models = await (await fetch(`${server.url}/v1/models`)).json();
    assert.deepEqual(models.data.map((m: { id: string }) => m.id), [
      "m1",
      "m2",
    ]);
    const health = await (await fetch(`${server.url}/health`)).json();
    assert.equal(health.status, "ok");
    assert.equal(health.workers_connected, 1);
    assert.equal(health.queue_depth, 0);
    await w.close();
  });
});

Deno.test("C14 non-streaming response passes status, headers and body through exactly", async () => {
  await withTestServer(testConfig(), async (server) => {
    const w = await registeredWorker(server);
    const pending = postChat(server, chatBody(), {
      headers: {
        "content-type": "application/json",
        authorization: "Bearer k",
        "user-agent": "x",
      },
    });
    const req = await w.next("request");
    assert.equal(req.endpoint_path, "/v1/chat/completions");
    assert.equal(req.is_streaming, false);
    assert.equal(req.body, chatBody());
    // C13: only compatibility headers are forwarded.
    assert.deepEqual(req.headers, {
      "content-type": "application/json",
      authorization: "Bearer k",
    });
    const body = '{"id":"x","choices":[{"message":{"content":"héllo"}}]}';
    w.send({
      type: "response_complete",
      request_id: req.request_id,
      status_code: 200,
      headers: { "content-type": "application/json", "x-backend": "yes" },
      body,
      token_counts: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 },
    });
    const res = await pending;
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-backend"), "yes");
    assert.equal(await res.text(), body);
    await w.close();
  });
});

Deno.test("C14 upstream 4xx and 5xx reach the client unchanged", async () => {
  await withTestServer(testConfig(), async (server) => {
    const w = await registeredWorker(server);
    for (const status of [400, 422, 500, 503]) {
      const pending = fetch(`${server.url}/v1/completions`, {
        method: "POST",
        body: chatBody(),
      });
      const req = await w.next("request");
      const body = JSON.stringify({
        error: { message: `backend says ${status}` },
      });
      w.send({
        type: "response_complete",
        request_id: req.request_id,
        status_code: status,
        body,
      });
      const res = await pending;
      assert.equal(res.status, status);
      assert.equal(await res.text(), body);
    }
    await w.close();
  });
});

Deno.test("C15 streaming chunks are written byte for byte, in order, with anti-buffering headers", async () => {
  await withTestServer(testConfig(), async (server) => {
    const w = await registeredWorker(server);
    const pending = postChat(server, chatBody("m1", true));
    const req = await w.next("request");
    assert.equal(req.is_streaming, true);
    const chunks = [
      'data: {"a":"é"}\n\n',
      'data: {"b":',
      "2}\n\ndata: [DONE]\n\n",
    ];
    w.send({
      type: "response_chunk",
      request_id: req.request_id,
      chunk: chunks[0],
    });
    const res = await pending;
    assert.equal(res.status, 200);
    assert.equal(
      res.headers.get("content-type"),
      "text/event-stream; charset=utf-8",
    );
    assert.equal(res.headers.get("x-accel-buffering"), "no");
    assert.equal(res.headers.get("cache-control"), "no-cache");
    for (const c of chunks.slice(1)) {
      w.send({ type: "response_chunk", request_id: req.request_id, chunk: c });
    }
    w.complete(req);
    assert.equal(await res.text(), chunks.join(""));
    await w.close();
  });
});

Deno.test("C11 unknown model answers 404 in the route's own error shape", async () => {
  await withTestServer(testConfig(), async (server) => {
    const w = await registeredWorker(server);
    const res = await postChat(server, chatBody("nope"));
    assert.equal(res.status, 404);
    const body = await res.json();
    assert.equal(body.error.code, "model_not_found");
    assert.match(body.error.message, /nope/);
    const anth = await fetch(`${server.url}/v1/messages`, {
      method: "POST",
      body: chatBody("nope"),
    });
    assert.equal(anth.status, 404);
    const ab = await anth.json();
    assert.equal(ab.type, "error");
    assert.equal(ab.error.type, "not_found_error");
    await w.close();
  });
});

Deno.test("bad bodies get clear 400 and 413 errors in the route's shape", async () => {
  await withTestServer(
    testConfig({}, { maxBodyBytes: 1000 }),
    async (server) => {
      const cases: [string, number, string][] = [
        ["not json", 400, "invalid_json"],
        ["[1]", 400, "invalid_body"],
        ['{"messages":[]}', 400, "model_required"],
        ['{"model":"m","stream":"yes"}', 400, "invalid_stream"],
        [
          JSON.stringify({ model: "m", pad: "x".repeat(2000) }),
          413,
          "body_too_large",
        ],
      ];
      for (const [body, status, code] of cases) {
        const res = await postChat(server, body);
        assert.equal(res.status, status, body.slice(0, 20));
        assert.equal((await res.json()).error.code, code);
      }
      const anth = await fetch(`${server.url}/v1/messages`, {
        method: "POST",
        body: "{",
      });
      const ab = await anth.json();
      assert.equal(ab.type, "error");
      assert.equal(ab.error.type, "invalid_request_error");
    },
  );
});

Deno.test("C9 queue full answers 503 with Retry-After and code queue_full", async () => {
  await withTestServer(testConfig({ queueLenMax: 1 }), async (server) => {
    const w = await registeredWorker(server, { max_concurrent: 1 });
    const { rejected: third, drain } = await overfullQueue(server, w);
    assert.equal(third.status, 503);
    assert.equal(third.headers.get("retry-after"), "1");
    assert.equal((await third.json()).error.code, "queue_full");
    assert.equal(await (await drain()).text(), "2");
    await w.close();
  });
});

Deno.test("C12 queue timeout answers 504 and no worker ever sees the request", async () => {
  await withTestServer(testConfig({ queueTimeoutMs: 200 }), async (server) => {
    const w = await registeredWorker(server, { max_concurrent: 1 });
    const busy = postChat(server, chatBody());
    const r1 = await w.next("request");
    const res = await postChat(server, chatBody());
    assert.equal(res.status, 504);
    assert.match((await res.json()).error.message, /queue timeout/);
    w.complete(r1, 200, "");
    await (await busy).text();
    assert.equal(w.frames.filter((f) => f.type === "request").length, 1);
    assert.equal(w.frames.filter((f) => f.type === "cancel").length, 0);
    await w.close();
  });
});

Deno.test("C22 a worker closed mid-request: the request is requeued to a second worker", async () => {
  await withTestServer(testConfig(), async (server) => {
    const a = await registeredWorker(server, { max_concurrent: 1 });
    const pending = postChat(server, chatBody());
    const r1 = await a.next("request");
    const b = await registeredWorker(server, { max_concurrent: 1 });
    // b is idle, a is busy: a crash of a moves the request to b with the same id.
    await a.close();
    const r2 = await b.next("request");
    assert.equal(r2.request_id, r1.request_id);
    b.complete(r2, 200, "ok");
    const res = await pending;
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "ok");
    await b.close();
  });
});

Deno.test("C2 a bad secret is refused with close 1008 and a reason", async () => {
  await withTestServer(testConfig(), async (server) => {
    const w = await connectWorker(server, { secret: "wrong" });
    const closed = await w.closed;
    assert.equal(closed.code, 1008);
    assert.match(closed.reason, /invalid worker secret/);
    const p = await connectWorker(server, { provider: "elsewhere" });
    const pc = await p.closed;
    assert.equal(pc.code, 1008);
    assert.match(pc.reason, /unknown provider/);
  });
});

Deno.test("C33 malformed frames close only the offender with 1002; others keep serving", async () => {
  await withTestServer(testConfig(), async (server) => {
    const good = await registeredWorker(server);
    const bad = await registeredWorker(server);
    bad.send({ type: "response_chunk", request_id: 5 });
    const closed = await bad.closed;
    assert.equal(closed.code, 1002);
    const garbage = await registeredWorker(server);
    garbage.ws.send("{not json");
    assert.equal((await garbage.closed).code, 1002);
    const binary = await registeredWorker(server);
    binary.ws.send(new Uint8Array([1, 2, 3]));
    assert.equal((await binary.closed).code, 1002);
    const pending = postChat(server, chatBody());
    const req = await good.next("request");
    good.complete(req, 200, "ok");
    assert.equal(await (await pending).text(), "ok");
    await good.close();
  });
});

Deno.test('C39 a worker that sends protocol_version "1" or none joins; another version is closed 1002', async () => {
  await withTestServer(testConfig(), async (server) => {
    const one = await registeredWorker(server, { protocol_version: "1" });
    assert.equal(one.ack.protocol_version, "1");
    const none = await registeredWorker(server, {
      protocol_version: undefined,
    });
    assert.equal(none.ack.protocol_version, undefined);
    const closed = await registerClosed(server, "9");
    assert.equal(closed.code, 1002);
    assert.match(closed.reason, /2026-04-bridge-v1/);
    await one.close();
    await none.close();
  });
});

Deno.test("C34 a worker's unsendable status or header never leaves the client hanging", async () => {
  await withTestServer(testConfig(), async (server) => {
    const w = await registeredWorker(server);
    const pending = postChat(server, chatBody());
    const req = await w.next("request");
    w.send({
      type: "response_complete",
      request_id: req.request_id,
      status_code: 200,
      headers: { "x-model": "模型", "bad header": "x", "x-ok": "yes" },
      body: "{}",
    });
    const res = await pending;
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-ok"), "yes");
    assert.equal(res.headers.get("x-model"), null);
    assert.equal(await res.text(), "{}");
    const informational = postChat(server, chatBody());
    const req2 = await w.next("request");
    w.complete(req2, 103, "");
    const res2 = await informational;
    assert.equal(res2.status, 502);
    await res2.body?.cancel();
    await w.close();
  });
});

Deno.test("C41 a close reason built from a long multi-byte worker value still closes the socket", async () => {
  await withTestServer(testConfig(), async (server) => {
    const closed = await registerClosed(server, "a" + "é".repeat(100));
    assert.equal(closed.code, 1002);
    assert.ok(new TextEncoder().encode(closed.reason).length <= 123);
  });
});
