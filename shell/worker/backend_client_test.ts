import assert from "node:assert/strict";
import { startMockBackend } from "../../mock/backend.ts";
import { waitFor, within } from "../procs.ts";
import {
  type AnswerSink,
  type BackendOutcome,
  BODY_PIECE_CHARS,
  forwardToBackend,
  listBackendModels,
  RESPONSE_FRAME_BYTES_MAX,
} from "./backend_client.ts";
import { requestFrame } from "./_test_worker.ts";
import type { RequestMessage } from "../../core/protocol/mod.ts";
import type { Completion } from "../../core/worker/mod.ts";
import { withMockBackend } from "../../mock/_with_backend.ts";

function request(
  body: Record<string, unknown>,
  over: Record<string, unknown> = {},
) {
  return requestFrame("r1", body, over) as RequestMessage;
}

const at = (url: string) => ({ url, apiKey: null });

function sink(
  chunks: string[] = [],
  over: Partial<AnswerSink> = {},
): AnswerSink {
  return {
    chunk: (c) =>
      chunks.push(typeof c === "string" ? c : new TextDecoder().decode(c)),
    bodyChunks: false,
    chunkBytes: false,
    hasRoom: () => true,
    ...over,
  };
}

function completed(o: BackendOutcome): Completion {
  assert.equal(o.kind, "completed", JSON.stringify(o).slice(0, 300));
  return (o as Extract<BackendOutcome, { kind: "completed" }>).completion;
}

function failedWith(o: BackendOutcome) {
  assert.equal(o.kind, "failed", JSON.stringify(o).slice(0, 300));
  return o as Extract<BackendOutcome, { kind: "failed" }>;
}

/** A port with nothing listening. */
async function closedPort(): Promise<number> {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  await new Promise((r) => setTimeout(r, 10));
  return port;
}

Deno.test("a stream's first chunk is passed on before the backend finishes", async () => {
  const backend = await startMockBackend({ chunkDelayMs: 30 });
  const chunks: string[] = [];
  const ac = new AbortController();
  try {
    const result = forwardToBackend(
      at(backend.url),
      request({ stream: true, max_tokens: 1000 }),
      ac.signal,
      sink(chunks),
    );
    await waitFor("first chunk", () => chunks.length > 0);
    assert.equal(backend.stats.openStreams, 1, "backend still streaming");
    ac.abort();
    assert.equal((await within("abort", result)).kind, "cancelled");
    await waitFor("backend sees the abort", () => backend.stats.aborted === 1);
  } finally {
    await backend.close();
  }
});

Deno.test("streamed usage becomes token_counts of the completion (text reads and chunk-bytes-v1 reads)", async () => {
  await withMockBackend({ chunkDelayMs: 0 }, async (backend) => {
    for (const chunkBytes of [false, true]) {
      const chunks: string[] = [];
      const c = completed(
        await forwardToBackend(
          at(backend.url),
          request({
            stream: true,
            max_tokens: 3,
            stream_options: { include_usage: true },
          }),
          new AbortController().signal,
          sink(chunks, { chunkBytes }),
        ),
      );
      assert.equal(c.status_code, 200);
      assert.equal(c.token_counts?.completion_tokens, 3, `${chunkBytes}`);
      assert.match(chunks.join(""), /data: \[DONE\]\n\n$/);
    }
  });
});

Deno.test("issue 14.3: a refused connection is a backend_unavailable failure, not an answer", async () => {
  const port = await closedPort();
  const f = failedWith(
    await forwardToBackend(
      at(`http://127.0.0.1:${port}`),
      request({}, { endpoint_path: "/v1/messages" }),
      new AbortController().signal,
      sink(),
    ),
  );
  assert.equal(f.code, "backend_unavailable");
  assert.match(f.message, /backend unreachable/);
});

Deno.test("issue 14.3: a connection reset before any response byte is a backend_unavailable failure", async () => {
  // A raw listener that reads the request and closes: no status line at all.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const accepting = (async () => {
    for await (const conn of listener) {
      await conn.read(new Uint8Array(65536));
      conn.close();
    }
  })();
  try {
    const f = failedWith(
      await forwardToBackend(
        at(`http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`),
        request({}),
        new AbortController().signal,
        sink(),
      ),
    );
    assert.equal(f.code, "backend_unavailable");
  } finally {
    listener.close();
    await accepting.catch(() => {});
  }
});

Deno.test("issue 14.4: a backend dying mid-stream is a backend_stream_broken failure after the chunks already passed on", async () => {
  const backend = await startMockBackend({ chunkDelayMs: 0 });
  const chunks: string[] = [];
  try {
    const f = failedWith(
      await forwardToBackend(
        at(backend.url),
        request({ stream: true, mock_fault: "die", mock_fault_after: 2 }),
        new AbortController().signal,
        sink(chunks),
      ),
    );
    assert.equal(f.code, "backend_stream_broken");
    assert.match(chunks.join(""), /"content":"quick "/);
  } finally {
    await backend.close();
  }
});

Deno.test("issue 14.2: without body-chunks-v1 a body too large for one frame is a 502 response_too_large answer, read no further", async () => {
  await withMockBackend({ chunkDelayMs: 0 }, async (backend) => {
    const c = completed(
      await forwardToBackend(
        at(backend.url),
        request({ mock_body_chars: RESPONSE_FRAME_BYTES_MAX + 1024 * 1024 }),
        new AbortController().signal,
        sink(),
      ),
    );
    assert.equal(c.status_code, 502);
    assert.equal(JSON.parse(c.body).error.code, "response_too_large");
  });
});

Deno.test("issue 14.11: with body-chunks-v1 a large body leaves in bounded pieces, the rest in the completion, usage still counted", async () => {
  const backend = await startMockBackend({ chunkDelayMs: 0 });
  const chunks: string[] = [];
  const size = 3 * BODY_PIECE_CHARS + 12345;
  try {
    const c = completed(
      await forwardToBackend(
        at(backend.url),
        request({ mock_body_chars: size }),
        new AbortController().signal,
        sink(chunks, { bodyChunks: true }),
      ),
    );
    assert.equal(c.status_code, 200);
    assert.ok(chunks.length >= 3);
    assert.ok(chunks.every((p) => p.length <= BODY_PIECE_CHARS));
    assert.ok(c.body.length < BODY_PIECE_CHARS);
    const whole = JSON.parse(chunks.join("") + c.body);
    assert.equal(whole.choices[0].message.content.length, size);
    assert.equal(c.token_counts?.prompt_tokens, whole.usage.prompt_tokens);
  } finally {
    await backend.close();
  }
});

Deno.test("issue 14.11: reading pauses while the proxy link has no room", async () => {
  const backend = await startMockBackend({ chunkDelayMs: 0 });
  const chunks: string[] = [];
  let room = false;
  try {
    const result = forwardToBackend(
      at(backend.url),
      request({ mock_body_chars: 8 * BODY_PIECE_CHARS }),
      new AbortController().signal,
      sink(chunks, { bodyChunks: true, hasRoom: () => room }),
    );
    await waitFor("a first piece", () => chunks.length > 0);
    await new Promise((r) => setTimeout(r, 100));
    // Paused: far fewer pieces than the body holds (socket buffers aside).
    assert.ok(chunks.length <= 4, `${chunks.length} pieces while paused`);
    room = true;
    assert.equal(completed(await within("the rest", result)).status_code, 200);
    assert.ok(chunks.length >= 8);
  } finally {
    await backend.close();
  }
});

Deno.test("small bodies keep the single response_complete even with body-chunks-v1", async () => {
  const backend = await startMockBackend({ chunkDelayMs: 0 });
  const chunks: string[] = [];
  try {
    const c = completed(
      await forwardToBackend(
        at(backend.url),
        request({ max_tokens: 3 }),
        new AbortController().signal,
        sink(chunks, { bodyChunks: true }),
      ),
    );
    assert.deepEqual(chunks, []);
    assert.equal(
      JSON.parse(c.body).choices[0].message.content,
      "The quick brown ",
    );
    assert.equal(c.token_counts?.completion_tokens, 3);
  } finally {
    await backend.close();
  }
});

Deno.test("issue 14.10: BACKEND_API_KEY replaces the client's Authorization on inference and discovery", async () => {
  const backend = await startMockBackend({ apiKey: "sk-b", models: ["x"] });
  const keyed = { url: backend.url, apiKey: "sk-b" };
  try {
    const c = completed(
      await forwardToBackend(
        keyed,
        request({ max_tokens: 1 }, {
          headers: { authorization: "Bearer client" },
        }),
        new AbortController().signal,
        sink(),
      ),
    );
    assert.equal(c.status_code, 200);
    assert.deepEqual(
      await listBackendModels(keyed, new AbortController().signal),
      ["x"],
    );
    await assert.rejects(
      listBackendModels(at(backend.url), new AbortController().signal),
      /answered 401/,
    );
  } finally {
    await backend.close();
  }
});

Deno.test("model discovery lists ids from /v1/models and says clearly when it cannot", async () => {
  const backend = await startMockBackend({ models: ["x", "y"] });
  try {
    assert.deepEqual(
      await listBackendModels(at(backend.url), new AbortController().signal),
      ["x", "y"],
    );
  } finally {
    await backend.close();
  }
  await assert.rejects(
    listBackendModels(at("http://127.0.0.1:1"), new AbortController().signal),
    /could not reach http:\/\/127\.0\.0\.1:1\/v1\/models/,
  );
});
