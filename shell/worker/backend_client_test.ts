import assert from "node:assert/strict";
import { startMockBackend } from "../../mock/backend.ts";
import { waitFor, within } from "../../mock/wait_for.ts";
import { forwardToBackend, listBackendModels } from "./backend_client.ts";
import { requestFrame } from "./_test_worker.ts";
import type { RequestMessage } from "../../core/protocol/mod.ts";

function request(
  body: Record<string, unknown>,
  over: Record<string, unknown> = {},
) {
  return requestFrame("r1", body, over) as RequestMessage;
}

Deno.test("a stream's first chunk is passed on before the backend finishes", async () => {
  const backend = await startMockBackend({ chunkDelayMs: 30 });
  const chunks: string[] = [];
  const ac = new AbortController();
  try {
    const result = forwardToBackend(
      { url: backend.url, apiKey: null },
      request({ stream: true, max_tokens: 1000 }),
      ac.signal,
      (c) => chunks.push(c),
    );
    await waitFor("first chunk", () => chunks.length > 0);
    assert.equal(backend.stats.openStreams, 1, "backend still streaming");
    ac.abort();
    assert.equal(await within("abort", result), null);
    await waitFor("backend sees the abort", () => backend.stats.aborted === 1);
  } finally {
    await backend.close();
  }
});

Deno.test("streamed usage becomes token_counts of the completion", async () => {
  const backend = await startMockBackend({ chunkDelayMs: 0 });
  try {
    const c = await forwardToBackend(
      { url: backend.url, apiKey: null },
      request({
        stream: true,
        max_tokens: 3,
        stream_options: { include_usage: true },
      }),
      new AbortController().signal,
      () => {},
    );
    assert.equal(c?.status_code, 200);
    assert.equal(c?.token_counts?.completion_tokens, 3);
  } finally {
    await backend.close();
  }
});

Deno.test("an unreachable backend gives 502 in the route's error shape", async () => {
  const c = await forwardToBackend(
    { url: "http://127.0.0.1:1", apiKey: null },
    request({}, { endpoint_path: "/v1/messages" }),
    new AbortController().signal,
    () => {},
  );
  assert.equal(c?.status_code, 502);
  const body = JSON.parse(c!.body);
  assert.equal(body.type, "error");
  assert.match(body.error.message, /backend unreachable/);
});

Deno.test("model discovery lists ids from /v1/models and says clearly when it cannot", async () => {
  const backend = await startMockBackend({ models: ["x", "y"] });
  try {
    assert.deepEqual(
      await listBackendModels(
        { url: backend.url, apiKey: null },
        new AbortController().signal,
      ),
      ["x", "y"],
    );
  } finally {
    await backend.close();
  }
  await assert.rejects(
    listBackendModels(
      { url: "http://127.0.0.1:1", apiKey: null },
      new AbortController().signal,
    ),
    /could not reach http:\/\/127\.0\.0\.1:1\/v1\/models/,
  );
});
