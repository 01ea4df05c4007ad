import assert from "node:assert/strict";
import { startMockBackend } from "./backend.ts";
import { waitFor } from "../shell/procs.ts";
import { withMockBackend } from "./_with_backend.ts";

function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
) {
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
    ...(signal === undefined ? {} : { signal }),
  });
}

function dataLines(text: string): string[] {
  return text.split("\n").filter((l) => l.startsWith("data: ")).map((l) =>
    l.slice(6)
  );
}

Deno.test("mock lists its models in the OpenAI list shape", async () => {
  await withMockBackend({ models: ["a", "b"] }, async (b) => {
    const res = await fetch(`${b.url}/v1/models`);
    const body = await res.json();
    assert.equal(body.object, "list");
    assert.deepEqual(body.data.map((m: { id: string }) => m.id), ["a", "b"]);
    assert.equal(b.stats.modelListings, 1);
  });
});

Deno.test("mock chat stream sends max_tokens word events in order and ends with [DONE]", async () => {
  await withMockBackend({
    chunkDelayMs: 0,
    answer: "one two three",
  }, async (b) => {
    const res = await post(`${b.url}/v1/chat/completions`, {
      model: "mock-model",
      stream: true,
      max_tokens: 5,
      stream_options: { include_usage: true },
    });
    assert.equal(res.headers.get("content-type"), "text/event-stream");
    const lines = dataLines(await res.text());
    assert.equal(lines.at(-1), "[DONE]");
    const chunks = lines.slice(0, -1).map((l) => JSON.parse(l));
    const words = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join(
      "",
    );
    assert.equal(words, "one two three one two ");
    assert.equal(chunks.at(-1).usage.completion_tokens, 5);
    assert.equal(b.stats.completedStreams, 1);
    assert.equal(b.stats.openStreams, 0);
  });
});

Deno.test("mock non-stream chat answers JSON with usage", async () => {
  await withMockBackend({ chunkDelayMs: 0 }, async (b) => {
    const res = await post(`${b.url}/v1/chat/completions`, {
      model: "mock-model",
      max_tokens: 3,
      messages: [{ role: "user", content: "hi there" }],
    });
    const body = await res.json();
    assert.equal(body.object, "chat.completion");
    assert.equal(body.usage.completion_tokens, 3);
    assert.equal(body.usage.total_tokens, body.usage.prompt_tokens + 3);
  });
});

Deno.test("mock completions stream and body use the text_completion shape", async () => {
  await withMockBackend({ chunkDelayMs: 0, answer: "x y" }, async (b) => {
    const streamed = dataLines(
      await (await post(`${b.url}/v1/completions`, {
        model: "m",
        stream: true,
      })).text(),
    );
    assert.equal(streamed.at(-1), "[DONE]");
    assert.equal(JSON.parse(streamed[0] ?? "").choices[0].text, "x ");
    const body = await (await post(`${b.url}/v1/completions`, { model: "m" }))
      .json();
    assert.equal(body.choices[0].text, "x y");
  });
});

Deno.test("mock messages stream emits the Anthropic event sequence", async () => {
  await withMockBackend({ chunkDelayMs: 0 }, async (b) => {
    const text = await (await post(`${b.url}/v1/messages`, {
      model: "claude-mock",
      stream: true,
      max_tokens: 2,
    })).text();
    const names = text.split("\n").filter((l) => l.startsWith("event: ")).map((
      l,
    ) => l.slice(7));
    assert.deepEqual(names, [
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    const body =
      await (await post(`${b.url}/v1/messages`, { model: "c", max_tokens: 2 }))
        .json();
    assert.equal(body.type, "message");
    assert.equal(body.usage.output_tokens, 2);
  });
});

Deno.test("mock responses stream emits Responses API events ending in response.completed", async () => {
  await withMockBackend({ chunkDelayMs: 0, answer: "hi you" }, async (b) => {
    const text =
      await (await post(`${b.url}/v1/responses`, { model: "m", stream: true }))
        .text();
    const events = dataLines(text).map((l) => JSON.parse(l));
    assert.equal(events[0].type, "response.created");
    const last = events.at(-1);
    assert.equal(last.type, "response.completed");
    assert.equal(last.response.output[0].content[0].text, "hi you");
    const deltas = events.filter((e) =>
      e.type === "response.output_text.delta"
    );
    assert.deepEqual(deltas.map((e) => e.delta), ["hi ", "you"]);
    assert.deepEqual(
      events.map((e) => e.sequence_number),
      events.map((_, i) => i),
    );
    const body = await (await post(`${b.url}/v1/responses`, { model: "m" }))
      .json();
    assert.equal(body.object, "response");
    assert.equal(body.usage.output_tokens, 2);
  });
});

Deno.test("mock answers the status named by an error-NNN model or x-mock-status", async () => {
  await withMockBackend({ chunkDelayMs: 0 }, async (b) => {
    const r1 = await post(`${b.url}/v1/chat/completions`, {
      model: "error-503",
      stream: true,
    });
    assert.equal(r1.status, 503);
    assert.match((await r1.json()).error.message, /503/);
    const r2 = await post(`${b.url}/v1/messages`, { model: "m" }, {
      "x-mock-status": "429",
    });
    assert.equal(r2.status, 429);
    assert.equal((await r2.json()).type, "error");
  });
});

Deno.test("mock echoes received headers when asked", async () => {
  await withMockBackend({ chunkDelayMs: 0 }, async (b) => {
    const res = await post(`${b.url}/v1/chat/completions`, { model: "m" }, {
      "x-mock-echo-headers": "1",
      authorization: "Bearer abc",
    });
    await res.body?.cancel();
    const echoed = JSON.parse(
      res.headers.get("x-mock-received-headers") ?? "{}",
    );
    assert.equal(echoed.authorization, "Bearer abc");
    assert.equal(b.stats.lastHeaders.authorization, "Bearer abc");
  });
});

Deno.test("mock counts a client abort mid-stream and closes the stream", async () => {
  await withMockBackend({ chunkDelayMs: 20 }, async (b) => {
    const ac = new AbortController();
    const res = await post(
      `${b.url}/v1/chat/completions`,
      { model: "m", stream: true, max_tokens: 1000 },
      {},
      ac.signal,
    );
    const reader = res.body!.getReader();
    await reader.read();
    assert.equal(b.stats.openStreams, 1);
    ac.abort();
    await reader.closed.catch(() => {});
    await waitFor("backend to see the abort", () => b.stats.aborted === 1);
    await waitFor("stream to close", () => b.stats.openStreams === 0);
    assert.equal(b.stats.completedStreams, 0);
  });
});

Deno.test("mock split-utf8 mode cuts events inside a multi-byte character", async () => {
  await withMockBackend(
    { chunkDelayMs: 2, answer: "héllo wörld" },
    async (b) => {
      const res = await post(`${b.url}/v1/completions`, {
        model: "m",
        stream: true,
      }, {
        "x-mock-split-utf8": "1",
      });
      const reader = res.body!.getReader();
      const parts: Uint8Array[] = [];
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        parts.push(value);
      }
      const whole = new TextDecoder().decode(
        new Uint8Array(parts.flatMap((p) => [...p])),
      );
      assert.match(whole, /héllo/);
      // Some read must end in the middle of a character: decoding it alone is lossy.
      assert.ok(
        parts.some((p) => new TextDecoder().decode(p).includes("\ufffd")),
      );
    },
  );
});

Deno.test("mock close() ends open streams promptly", async () => {
  const b = await startMockBackend({ chunkDelayMs: 1_000 });
  const res = await post(`${b.url}/v1/chat/completions`, {
    model: "m",
    stream: true,
  });
  const reader = res.body!.getReader();
  await reader.read();
  await b.close();
  for (;;) if ((await reader.read().catch(() => ({ done: true }))).done) break;
  assert.equal(b.stats.openStreams, 0);
});

Deno.test("mock faults: die cuts a stream after mock_fault_after words, reset cuts before any body byte", async () => {
  const b = await startMockBackend({ chunkDelayMs: 0 });
  const chat = `${b.url}/v1/chat/completions`;
  try {
    const dying = await post(chat, {
      model: "m",
      stream: true,
      mock_fault: "die",
      mock_fault_after: 2,
    });
    let text = "";
    const reader = dying.body!.pipeThrough(new TextDecoderStream())
      .getReader();
    await assert.rejects(async () => {
      for (;;) {
        const r = await reader.read();
        if (r.done) break;
        text += r.value;
      }
    });
    assert.match(text, /"content":"quick "/);
    assert.doesNotMatch(text, /\[DONE\]/);
    const reset = await post(chat, { model: "m", mock_fault: "reset" });
    await assert.rejects(reset.text());
    assert.equal(b.stats.faults, 2);
  } finally {
    await b.close();
  }
});

Deno.test("mock mock_body_chars answers a JSON body of that many content characters", async () => {
  await withMockBackend({ chunkDelayMs: 0 }, async (b) => {
    const res = await post(`${b.url}/v1/chat/completions`, {
      model: "m",
      mock_body_chars: 3 * 1024 * 1024 + 5,
    });
    const body = await res.json();
    assert.equal(body.choices[0].message.content.length, 3 * 1024 * 1024 + 5);
  });
});

Deno.test("mock with apiKey answers 401 without the Bearer key, on every route", async () => {
  await withMockBackend({ apiKey: "k" }, async (b) => {
    const bare = await fetch(`${b.url}/v1/models`);
    await bare.body?.cancel();
    assert.equal(bare.status, 401);
    const keyed = await fetch(`${b.url}/v1/models`, {
      headers: { authorization: "Bearer k" },
    });
    await keyed.body?.cancel();
    assert.equal(keyed.status, 200);
    assert.equal(b.stats.unauthorized, 1);
  });
});
