import assert from "node:assert/strict";
import {
  type MockBackend,
  type MockBackendOptions,
  startMockBackend,
} from "../../mock/backend.ts";
import { waitFor, within } from "../procs.ts";
import { type Frame, startTestProxy, type TestProxy } from "./_test_proxy.ts";
import { requestFrame, runTestWorker, testConfig } from "./_test_worker.ts";

const isRegistered = (w: { logs: { message: string }[] }) => () =>
  w.logs.some((l) => l.message === "registered");

function framesFor(frames: Frame[], id: string): Frame[] {
  return frames.filter((f) => f.request_id === id);
}

function contentOf(chunks: Frame[]): string {
  return chunks.map((f) => f.chunk).join("").split("\n")
    .filter((l: string) => l.startsWith("data: {"))
    .map((l: string) => JSON.parse(l.slice(6)).choices[0]?.delta?.content ?? "")
    .join("");
}

type Running = {
  proxy: TestProxy;
  worker: ReturnType<typeof runTestWorker>;
};

/**
 * A worker between a test proxy and a mock backend started with
 * `backendOpts` (null: no backend, a closed port), once registered; all
 * stopped after `fn`, whatever it throws.
 */
function withWorker(
  backendOpts: MockBackendOptions,
  fn: (t: Running & { backend: MockBackend }) => Promise<void>,
): Promise<void>;
function withWorker(
  backendOpts: null,
  fn: (t: Running) => Promise<void>,
): Promise<void>;
async function withWorker(
  backendOpts: MockBackendOptions | null,
  fn: (t: Running & { backend: MockBackend }) => Promise<void>,
): Promise<void> {
  const backend = backendOpts === null
    ? null
    : await startMockBackend(backendOpts);
  const proxy = await startTestProxy();
  const worker = runTestWorker(
    testConfig(proxy.url, backend?.url ?? "http://127.0.0.1:1"),
  );
  try {
    await waitFor("registered", isRegistered(worker));
    await fn({ backend: backend!, proxy, worker });
  } finally {
    await stopWorker(worker);
    await proxy.close();
    await backend?.close();
  }
}

async function stopWorker(
  w: ReturnType<typeof runTestWorker>,
): Promise<number> {
  w.signal();
  return await within("worker to stop", w.done);
}

Deno.test("C39 worker registers with protocol_version 2026-04-bridge-v1, its models, capacity and secret header", async () => {
  const proxy = await startTestProxy();
  const worker = runTestWorker(
    testConfig(proxy.url, "http://127.0.0.1:1", {
      maxConcurrent: 3,
      models: ["a", "b"],
    }),
  );
  try {
    const reg = await proxy.waitFrame("register", (f) => f.type === "register");
    assert.equal(reg.protocol_version, "2026-04-bridge-v1");
    assert.deepEqual(reg.models, ["a", "b"]);
    assert.equal(reg.max_concurrent, 3);
    assert.equal(reg.current_load, 0);
    assert.equal(reg.worker_name, "test-worker");
    assert.deepEqual(proxy.secretsSeen, ["test-secret"]);
    await waitFor("registered log", isRegistered(worker));
    assert.ok(worker.logs.some((l) => l.message === "proxy warning"));
    assert.ok(
      !JSON.stringify(worker.logs).includes("test-secret"),
      "secret never logged",
    );
  } finally {
    assert.equal(await stopWorker(worker), 0);
    await proxy.close();
  }
});

Deno.test("C39 worker joins an original-style server that accepts only 2026-04-bridge-v1 or none", async () => {
  const proxy = await startTestProxy({
    acceptVersion: (v) => v === undefined || v === "2026-04-bridge-v1",
  });
  const worker = runTestWorker(testConfig(proxy.url, "http://127.0.0.1:1"));
  try {
    await waitFor("registered", isRegistered(worker));
    proxy.send({ type: "ping", timestamp_unix_ms: 42 });
    const pong = await proxy.waitFrame("pong", (f) => f.type === "pong");
    assert.equal(pong.timestamp_unix_ms, 42);
    assert.equal(pong.current_load, 0);
    assert.ok(proxy.isOpen());
    assert.deepEqual(proxy.closes, []);
  } finally {
    await stopWorker(worker);
    await proxy.close();
  }
});

Deno.test("ping without a timestamp gets a pong without one (C40)", async () => {
  await withWorker(null, async ({ proxy }) => {
    proxy.send({ type: "ping" });
    const pong = await proxy.waitFrame("pong", (f) => f.type === "pong");
    assert.equal("timestamp_unix_ms" in pong, false);
  });
});

Deno.test("C15 streaming request: chunks arrive in order, one frame per read, then response_complete", async () => {
  await withWorker({
    chunkDelayMs: 5,
    answer: "a b c d e f g h",
  }, async ({ proxy }) => {
    proxy.send(requestFrame("r1", { stream: true, max_tokens: 8 }));
    const done = await proxy.waitFrame(
      "complete",
      (f) => f.type === "response_complete",
    );
    const frames = framesFor(proxy.frames, "r1");
    assert.equal(frames.at(-1), done);
    const chunks = frames.filter((f) => f.type === "response_chunk");
    assert.ok(
      chunks.length >= 8,
      `expected a frame per read, got ${chunks.length}`,
    );
    assert.equal(contentOf(chunks), "a b c d e f g h");
    assert.match(chunks.at(-1)!.chunk, /data: \[DONE\]\n\n$/);
    assert.equal(done.status_code, 200);
    assert.equal(done.body, "");
  });
});

Deno.test("C45 a character split across backend reads reaches the proxy intact", async () => {
  await withWorker({
    chunkDelayMs: 4,
    answer: "héllo wörld ünïcode",
  }, async ({ proxy }) => {
    proxy.send(requestFrame("r1", { stream: true }, {
      headers: { "content-type": "application/json", "x-mock-split-utf8": "1" },
    }));
    await proxy.waitFrame("complete", (f) => f.type === "response_complete");
    const chunks = framesFor(proxy.frames, "r1").filter((f) =>
      f.type === "response_chunk"
    );
    const text = chunks.map((f) => f.chunk).join("");
    assert.ok(!text.includes("\ufffd"), "no replacement characters");
    assert.equal(contentOf(chunks), "héllo wörld ünïcode");
  });
});

Deno.test("C14 non-streaming request: one response_complete with status, headers, body and token_counts", async () => {
  await withWorker({ chunkDelayMs: 0 }, async ({ proxy }) => {
    proxy.send(
      requestFrame("r1", {
        max_tokens: 4,
        messages: [{ role: "user", content: "hi" }],
      }),
    );
    const done = await proxy.waitFrame(
      "complete",
      (f) => f.type === "response_complete",
    );
    assert.deepEqual(framesFor(proxy.frames, "r1"), [done]);
    assert.equal(done.status_code, 200);
    assert.equal(done.headers["content-type"], "application/json");
    assert.equal(JSON.parse(done.body).object, "chat.completion");
    assert.equal(done.token_counts.completion_tokens, 4);
    assert.equal(
      done.token_counts.total_tokens,
      done.token_counts.prompt_tokens + 4,
    );
  });
});

Deno.test("C13 forwarded headers reach the backend", async () => {
  await withWorker({ chunkDelayMs: 0 }, async ({ backend, proxy }) => {
    proxy.send(requestFrame("r1", {}, {
      endpoint_path: "/v1/messages",
      headers: {
        "content-type": "application/json",
        "x-api-key": "k-1",
        "anthropic-version": "2023-06-01",
      },
    }));
    const done = await proxy.waitFrame(
      "complete",
      (f) => f.type === "response_complete",
    );
    assert.equal(done.status_code, 200);
    assert.equal(backend.stats.lastHeaders["x-api-key"], "k-1");
    assert.equal(backend.stats.lastHeaders["anthropic-version"], "2023-06-01");
    assert.equal(
      done.token_counts.completion_tokens,
      JSON.parse(done.body).usage.output_tokens,
    );
  });
});

Deno.test("C44 cancel aborts the backend request at once and answers response_complete 499", async () => {
  await withWorker({ chunkDelayMs: 20 }, async ({ backend, proxy, worker }) => {
    proxy.send(requestFrame("r1", { stream: true, max_tokens: 10_000 }));
    await proxy.waitFrame("first chunk", (f) => f.type === "response_chunk");
    proxy.send({
      type: "cancel",
      request_id: "r1",
      reason: "client_disconnect",
    });
    const done = await proxy.waitFrame(
      "499",
      (f) => f.type === "response_complete",
    );
    assert.equal(done.status_code, 499);
    assert.equal(done.body, "");
    await waitFor(
      "backend to see the connection closed",
      () => backend.stats.aborted === 1,
    );
    await waitFor(
      "backend stream to end",
      () => backend.stats.openStreams === 0,
    );
    const frames = framesFor(proxy.frames, "r1");
    assert.equal(frames.at(-1), done, "no chunk after the 499");
    assert.equal(proxy.frames.filter((f) => f.type === "error").length, 0);
    assert.ok(worker.logs.some((l) => l.message === "cancelled"));
  });
});

Deno.test("backend down, original proxy (no extensions): response_complete 502 with a clear JSON message", async () => {
  await withWorker(null, async ({ proxy, worker }) => {
    proxy.send(requestFrame("r1", { stream: true }));
    const done = await proxy.waitFrame(
      "complete",
      (f) => f.type === "response_complete",
    );
    assert.equal(done.status_code, 502);
    const body = JSON.parse(done.body);
    assert.match(
      body.error.message,
      /backend unreachable at http:\/\/127\.0\.0\.1:1/,
    );
    assert.ok(worker.logs.some((l) => l.message === "backend unavailable"));
  });
});

Deno.test("issue 14.3: backend down, proxy with extensions: a scoped error backend_unavailable, so the proxy can requeue", async () => {
  const proxy = await startTestProxy({ ackExtensions: ["capabilities-v1"] });
  const worker = runTestWorker(testConfig(proxy.url, "http://127.0.0.1:1"));
  try {
    await waitFor("registered", isRegistered(worker));
    proxy.send(requestFrame("r1", { stream: true }));
    const error = await proxy.waitFrame("error", (f) => f.type === "error");
    assert.equal(error.request_id, "r1");
    assert.equal(error.code, "backend_unavailable");
    assert.match(error.message, /backend unreachable/);
    assert.ok(!proxy.frames.some((f) => f.type === "response_complete"));
  } finally {
    await stopWorker(worker);
    await proxy.close();
  }
});

Deno.test("issue 14.4: backend dies mid-stream, proxy with extensions: the chunks, then a scoped error backend_stream_broken", async () => {
  const backend = await startMockBackend({ chunkDelayMs: 0 });
  const proxy = await startTestProxy({ ackExtensions: ["capabilities-v1"] });
  const worker = runTestWorker(testConfig(proxy.url, backend.url));
  try {
    await waitFor("registered", isRegistered(worker));
    proxy.send(requestFrame("r1", { stream: true, mock_fault: "die" }));
    const error = await proxy.waitFrame("error", (f) => f.type === "error");
    assert.equal(error.code, "backend_stream_broken");
    assert.ok(proxy.frames.some((f) => f.type === "response_chunk"));
    assert.ok(!proxy.frames.some((f) => f.type === "response_complete"));
  } finally {
    await stopWorker(worker);
    await proxy.close();
    await backend.close();
  }
});

Deno.test("C14 backend 5xx on a streaming request: real status and body in response_complete", async () => {
  await withWorker({ chunkDelayMs: 0 }, async ({ proxy }) => {
    proxy.send(requestFrame("r1", { stream: true, model: "error-503" }));
    const done = await proxy.waitFrame(
      "complete",
      (f) => f.type === "response_complete",
    );
    assert.deepEqual(framesFor(proxy.frames, "r1"), [done]);
    assert.equal(done.status_code, 503);
    assert.match(JSON.parse(done.body).error.message, /503/);
  });
});

Deno.test("worker reconnects and registers again after the proxy restarts", async () => {
  const first = await startTestProxy();
  const port = first.port;
  const worker = runTestWorker(testConfig(first.url, "http://127.0.0.1:1"));
  let second: Awaited<ReturnType<typeof startTestProxy>> | null = null;
  try {
    await first.waitFrame("register", (f) => f.type === "register");
    await first.close();
    await waitFor(
      "disconnect noticed",
      () =>
        worker.logs.some((l) =>
          l.message.startsWith("disconnected from proxy")
        ),
    );
    second = await startTestProxy({ port });
    const reg = await second.waitFrame(
      "register again",
      (f) => f.type === "register",
      10_000,
    );
    assert.equal(reg.protocol_version, "2026-04-bridge-v1");
    await waitFor(
      "registered twice",
      () => worker.logs.filter((l) => l.message === "registered").length === 2,
    );
  } finally {
    await stopWorker(worker);
    await second?.close();
  }
});

Deno.test("a rejected secret (close 1008) is logged plainly and retried slowly", async () => {
  const proxy = await startTestProxy({ secret: "other" });
  const worker = runTestWorker(testConfig(proxy.url, "http://127.0.0.1:1"));
  try {
    await waitFor(
      "rejection logged",
      () =>
        worker.logs.some((l) =>
          l.message.startsWith("proxy rejected this worker")
        ),
    );
    const line = worker.logs.find((l) =>
      l.message.startsWith("proxy rejected")
    )!;
    assert.equal(line.level, "error");
    assert.ok(Number(line.fields.retry_in_ms) >= 30_000);
    assert.equal(proxy.connections, 1);
  } finally {
    assert.equal(await stopWorker(worker), 0);
    await proxy.close();
  }
});

Deno.test("models_refresh re-lists discovered models and sends models_update", async () => {
  const backend = await startMockBackend({ models: ["m1"] });
  const proxy = await startTestProxy();
  const worker = runTestWorker(
    testConfig(proxy.url, backend.url, { models: null }),
    ["m1"],
  );
  try {
    await waitFor("registered", isRegistered(worker));
    backend.setModels(["m1", "m2"]);
    proxy.send({ type: "models_refresh", reason: "periodic" });
    const update = await proxy.waitFrame(
      "models_update",
      (f) => f.type === "models_update",
    );
    assert.deepEqual(update.models, ["m1", "m2"]);
  } finally {
    await stopWorker(worker);
    await proxy.close();
    await backend.close();
  }
});

Deno.test("discovered models are refreshed periodically and a change is announced", async () => {
  const backend = await startMockBackend({ models: ["m1"] });
  const proxy = await startTestProxy();
  const worker = runTestWorker(
    testConfig(proxy.url, backend.url, { models: null, modelsRefreshSecs: 1 }),
    ["m1"],
  );
  try {
    await waitFor("registered", isRegistered(worker));
    backend.setModels(["m2"]);
    const update = await proxy.waitFrame(
      "models_update",
      (f) => f.type === "models_update",
    );
    assert.deepEqual(update.models, ["m2"]);
  } finally {
    await stopWorker(worker);
    await proxy.close();
    await backend.close();
  }
});

Deno.test("C29 drain: models_update [] goes out, new requests get 503, the in-flight stream finishes, close 1000", async () => {
  const backend = await startMockBackend({ chunkDelayMs: 10 });
  const proxy = await startTestProxy();
  const worker = runTestWorker(testConfig(proxy.url, backend.url));
  try {
    await waitFor("registered", isRegistered(worker));
    proxy.send(requestFrame("r1", { stream: true, max_tokens: 20 }));
    await proxy.waitFrame("first chunk", (f) => f.type === "response_chunk");
    worker.signal();
    const update = await proxy.waitFrame(
      "models_update",
      (f) => f.type === "models_update",
    );
    assert.deepEqual(update.models, []);
    proxy.send(requestFrame("r2", {}));
    const refused = await proxy.waitFrame("503", (f) => f.request_id === "r2");
    assert.equal(refused.status_code, 503);
    assert.match(JSON.parse(refused.body).error.message, /shutting down/);
    assert.equal(await within("worker exit", worker.done), 0);
    const done = framesFor(proxy.frames, "r1").at(-1)!;
    assert.equal(done.type, "response_complete");
    assert.equal(done.status_code, 200);
    assert.equal(backend.stats.completedStreams, 1);
    await waitFor("close seen", () => proxy.closes.length === 1);
    assert.equal(proxy.closes[0]?.code, 1000);
  } finally {
    await proxy.close();
    await backend.close();
  }
});

Deno.test("C28 graceful_shutdown from the proxy: in-flight work finishes, then the worker exits when closed", async () => {
  const backend = await startMockBackend({ chunkDelayMs: 10 });
  const proxy = await startTestProxy();
  const worker = runTestWorker(testConfig(proxy.url, backend.url));
  try {
    await waitFor("registered", isRegistered(worker));
    proxy.send(requestFrame("r1", { stream: true, max_tokens: 10 }));
    await proxy.waitFrame("first chunk", (f) => f.type === "response_chunk");
    proxy.send({
      type: "graceful_shutdown",
      reason: "maintenance",
      drain_timeout_secs: 30,
    });
    proxy.send(requestFrame("r2", {}));
    const refused = await proxy.waitFrame("503", (f) => f.request_id === "r2");
    assert.equal(refused.status_code, 503);
    const done = await proxy.waitFrame(
      "r1 done",
      (f) => f.request_id === "r1" && f.type === "response_complete",
    );
    assert.equal(done.status_code, 200);
    await proxy.close();
    assert.equal(await within("worker exit", worker.done), 0);
  } finally {
    await proxy.close();
    await backend.close();
  }
});
