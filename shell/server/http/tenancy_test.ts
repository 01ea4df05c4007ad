import assert from "node:assert/strict";
import OpenAI from "openai";
import {
  chatBody,
  overfullQueue,
  postChat,
  registeredWorker,
  startedStream,
  startTestServer,
  testConfig,
  waitFor,
  withTestServer,
} from "../_test_helpers.ts";

const JSON_TYPE = { "content-type": "application/json" };

/** A whole chat completion answering "hi", as the SDK expects one. */
function completion(id: string): string {
  return JSON.stringify({
    id,
    object: "chat.completion",
    created: 0,
    model: "m1",
    choices: [{
      index: 0,
      message: { role: "assistant", content: "hi" },
      finish_reason: "stop",
    }],
  });
}

Deno.test("spec 004 tenant, priority and cache headers reach the worker; response headers are present", async () => {
  await withTestServer(testConfig(), async (server) => {
    const w = await registeredWorker(server);
    const pending = postChat(server, chatBody(), {
      headers: {
        "content-type": "application/json",
        "x-tenant-id": "team-a",
        "x-priority": "high",
        "x-cache-mode": "prefix",
        "x-cache-tag": "session-1",
        "x-unrelated": "stays here",
      },
    });
    const req = await w.next("request");
    assert.deepEqual(req.headers, {
      "content-type": "application/json",
      "x-tenant-id": "team-a",
      "x-priority": "high",
      "x-cache-mode": "prefix",
      "x-cache-tag": "session-1",
    });
    w.complete(req, 200, "{}", {
      "content-type": "application/json",
      "x-cache-hit": "true",
      "x-gpu-time-ms": "42",
    });
    const res = await pending;
    await res.text();
    assert.equal(res.headers.get("x-queue-wait-ms"), "0");
    assert.equal(res.headers.get("x-cache-hit"), "true");
    assert.equal(res.headers.get("x-gpu-time-ms"), "42");
    assert.equal(res.headers.get("x-cache-tokens-reused"), "0");
    // A stream gets the defaults: its headers go out before the backend's are known.
    const { req: sreq, res: sres } = await startedStream(server, w);
    assert.equal(sres.headers.get("x-cache-hit"), "false");
    assert.equal(sres.headers.get("x-queue-wait-ms"), "0");
    w.complete(sreq);
    await sres.text();
    await w.close();
  });
});

Deno.test("spec 004 invalid tenancy headers get 400 with the reason", async () => {
  await withTestServer(testConfig(), async (server) => {
    const cases: [Record<string, string>, string][] = [
      [{ "x-tenant-id": "has space" }, "invalid_tenant"],
      [{ "x-priority": "urgent" }, "invalid_priority"],
      [{ "x-cache-mode": "always" }, "invalid_cache_mode"],
      [{ "x-cache-tag": "t".repeat(65) }, "invalid_cache_tag"],
    ];
    for (const [headers, code] of cases) {
      const res = await postChat(server, chatBody(), {
        headers,
      });
      assert.equal(res.status, 400);
      assert.equal((await res.json()).error.code, code);
    }
  });
});

Deno.test("spec 004 a tenant over its rate limit gets 429 with Retry-After and the spec body, nothing forwarded", async () => {
  const server = await startTestServer(
    testConfig({ rateLimits: { "team-a": { limit: 1, windowMs: 60_000 } } }),
  );
  try {
    const w = await registeredWorker(server);
    const first = postChat(server, chatBody(), {
      headers: { "x-tenant-id": "team-a" },
    });
    const r1 = await w.next("request");
    w.complete(r1, 200, "ok");
    assert.equal(await (await first).text(), "ok");
    const res = await postChat(server, chatBody(), {
      headers: { "x-tenant-id": "team-a" },
    });
    assert.equal(res.status, 429);
    const retryAfter = Number(res.headers.get("retry-after"));
    assert.ok(
      retryAfter >= 59 && retryAfter <= 60,
      `retry-after ${retryAfter}`,
    );
    const body = await res.json();
    assert.equal(body.error.code, "rate_limit_exceeded");
    assert.equal(body.error.limit, 1);
    assert.equal(body.error.remaining, 0);
    assert.ok(body.error.resetAt > Date.now() / 1000);
    // Another tenant is unaffected.
    const other = postChat(server, chatBody());
    const r2 = await w.next("request");
    w.complete(r2, 200, "ok");
    assert.equal((await other).status, 200);
    await (await other).body?.cancel().catch(() => {});
    assert.equal(w.frames.filter((f) => f.type === "request").length, 2);
    await w.close();
  } finally {
    await server.close();
  }
});

Deno.test("spec 004 queue full answers 503 with queueDepth and avgWaitMs in the body", async () => {
  await withTestServer(testConfig({ queueLenMax: 1 }), async (server) => {
    const w = await registeredWorker(server, { max_concurrent: 1 });
    const { rejected: res, drain } = await overfullQueue(server, w);
    assert.equal(res.status, 503);
    assert.ok(Number(res.headers.get("retry-after")) >= 1);
    const body = await res.json();
    assert.equal(body.error.code, "queue_full");
    assert.equal(body.error.queueDepth, 1);
    assert.equal(typeof body.error.avgWaitMs, "number");
    const q = await drain();
    assert.ok(Number(q.headers.get("x-queue-wait-ms")) >= 0);
    await q.text();
    await w.close();
  });
});

Deno.test("spec 004 X-Priority: a queued high request is dispatched before older low ones", async () => {
  await withTestServer(testConfig(), async (server) => {
    const w = await registeredWorker(server, { max_concurrent: 1 });
    const send = (priority: string) =>
      postChat(server, JSON.stringify({ model: "m1", tag: priority }), {
        headers: { "x-priority": priority },
      });
    const busy = send("normal");
    const r0 = await w.next("request");
    const low = send("low");
    await waitFor(
      "low queued",
      () => server.runtime.state.queues.get("local")!.length === 1,
    );
    const high = send("high");
    await waitFor(
      "high queued",
      () => server.runtime.state.queues.get("local")!.length === 2,
    );
    w.complete(r0, 200, "");
    const next = await w.next("request");
    assert.match(next.body as string, /"high"/);
    w.complete(next, 200, "");
    const last = await w.next("request");
    assert.match(last.body as string, /"low"/);
    w.complete(last, 200, "");
    for (const r of [busy, low, high]) await (await r).text();
    await w.close();
  });
});

Deno.test("spec 004 the official openai SDK honours Retry-After on 429 and then succeeds", async () => {
  const server = await startTestServer(
    testConfig({ rateLimits: { default: { limit: 1, windowMs: 1000 } } }),
  );
  try {
    const w = await registeredWorker(server);
    const answer = (async () => {
      for (let i = 0; i < 2; i++) {
        const req = await w.next("request", 10_000);
        w.complete(req, 200, completion(`c${i}`), JSON_TYPE);
      }
    })();
    const client = new OpenAI({
      baseURL: `${server.url}/v1`,
      apiKey: "k",
      maxRetries: 2,
    });
    const first = await client.chat.completions.create({
      model: "m1",
      messages: [{ role: "user", content: "a" }],
    });
    assert.equal(first.choices[0]!.message.content, "hi");
    const started = performance.now();
    const second = await client.chat.completions.create({
      model: "m1",
      messages: [{ role: "user", content: "b" }],
    });
    assert.equal(second.choices[0]!.message.content, "hi");
    // It waited for the window instead of failing.
    assert.ok(performance.now() - started >= 500);
    await answer;
    await w.close();
  } finally {
    await server.close();
  }
});

Deno.test("spec 004 the official openai SDK honours Retry-After on 503 queue_full and then succeeds", async () => {
  const statuses: number[] = [];
  const server = await startTestServer(testConfig({ queueLenMax: 0 }), {
    onRequestFinished: (e) => void statuses.push(e.status),
  });
  try {
    const w = await registeredWorker(server, { max_concurrent: 1 });
    // One request holds the only slot, so the SDK's first attempt meets a full queue.
    const busy = postChat(server, chatBody());
    const r0 = await w.next("request");
    const client = new OpenAI({
      baseURL: `${server.url}/v1`,
      apiKey: "k",
      maxRetries: 3,
    });
    const started = performance.now();
    const sdkCall = client.chat.completions.create({
      model: "m1",
      messages: [{ role: "user", content: "b" }],
    });
    await waitFor(
      "the 503 to be answered",
      () =>
        server.runtime.state.requests.size === 1 &&
        performance.now() - started > 50,
    );
    w.complete(r0, 200, completion("c0"), JSON_TYPE);
    await (await busy).text();
    const r1 = await w.next("request", 10_000);
    w.complete(r1, 200, completion("c1"), JSON_TYPE);
    const result = await sdkCall;
    assert.equal(result.id, "c1");
    // The retry waited for Retry-After (1 s) rather than failing or hammering.
    assert.ok(performance.now() - started >= 900);
    await w.close();
  } finally {
    await server.close();
  }
});
