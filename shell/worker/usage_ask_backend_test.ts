// Issue 33 through the worker's backend client: a backend known to be
// llama-server is asked for usage on a chat stream, its usage chunk is taken
// out (timings put back), the completion carries its counts; text reads and
// chunk-bytes-v1 reads alike. A break right after the final chunk still lets
// that chunk go before the break is reported.
import assert from "node:assert/strict";
import {
  type AnswerSink,
  type Backend,
  type BackendOutcome,
  forwardToBackend,
} from "./backend_client.ts";
import { requestFrame } from "./_test_worker.ts";
import type { RequestMessage } from "../../core/protocol/mod.ts";

const HEAD =
  'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"catch"}}],"created":1,"id":"c1","model":"tiny","object":"chat.completion.chunk"}\n\n';
const FINISH =
  'data: {"choices":[{"finish_reason":"length","index":0,"delta":{}}],"created":1,"id":"c1","model":"tiny","object":"chat.completion.chunk"';
const TIMINGS = '"timings":{"prompt_n":29,"predicted_per_second":1980.5}';
const USAGE =
  'data: {"choices":[],"created":1,"id":"c1","model":"tiny","object":"chat.completion.chunk","usage":{"completion_tokens":1,"prompt_tokens":29,"total_tokens":30},' +
  TIMINGS + "}\n\n";

function httpChunk(text: string): string {
  return `${new TextEncoder().encode(text).length.toString(16)}\r\n${text}\r\n`;
}

/** A backend that answers one request with `events`, then ends or breaks. */
function backendOnce(
  events: string[],
  end: "complete" | "break",
): { url: string; body: Promise<string>; close(): void } {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const body = (async () => {
    const conn = await listener.accept();
    let got = "";
    const buf = new Uint8Array(65536);
    while (!got.includes("\r\n\r\n") || !got.trimEnd().endsWith("}")) {
      const n = await conn.read(buf);
      if (n === null) break;
      got += new TextDecoder().decode(buf.subarray(0, n));
    }
    const w = (s: string) => conn.write(new TextEncoder().encode(s));
    await w(
      "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
    );
    for (const e of events) await w(httpChunk(e));
    if (end === "complete") await w("0\r\n\r\n");
    conn.close();
    return got.slice(got.indexOf("\r\n\r\n") + 4);
  })();
  return {
    url: `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    body,
    close: () => listener.close(),
  };
}

function sink(chunks: string[], chunkBytes: boolean): AnswerSink {
  return {
    chunk: (c) =>
      chunks.push(typeof c === "string" ? c : new TextDecoder().decode(c)),
    bodyChunks: false,
    chunkBytes,
    hasRoom: () => true,
  };
}

const llama = (url: string): Backend => ({
  url,
  apiKey: null,
  flavour: "llama-server",
});

const chat = requestFrame("r1", {
  model: "tiny",
  stream: true,
  messages: [{ role: "user", content: "hi" }],
}) as RequestMessage;

for (const chunkBytes of [false, true]) {
  const how = chunkBytes ? "chunk-bytes-v1 reads" : "text reads";
  Deno.test(`issue 33 llama-server chat stream (${how}): asked for usage, the client gets the unasked bytes and the completion the counts`, async () => {
    const b = backendOnce(
      [HEAD, FINISH + "}\n\n", USAGE, "data: [DONE]\n\n"],
      "complete",
    );
    try {
      const chunks: string[] = [];
      const o: BackendOutcome = await forwardToBackend(
        llama(b.url),
        chat,
        new AbortController().signal,
        sink(chunks, chunkBytes),
      );
      assert.match(
        await b.body,
        /^\{"stream_options":\{"include_usage":true\},"model":"tiny"/,
      );
      assert.equal(o.kind, "completed");
      if (o.kind !== "completed") return;
      assert.equal(
        chunks.join(""),
        HEAD + FINISH + "," + TIMINGS + "}\n\ndata: [DONE]\n\n",
      );
      assert.deepEqual(o.completion.token_counts, {
        prompt_tokens: 29,
        completion_tokens: 1,
        total_tokens: 30,
      });
    } finally {
      b.close();
    }
  });

  Deno.test(`issue 33 a break right after the held final chunk still lets it go first (${how})`, async () => {
    const b = backendOnce([HEAD, FINISH + "}\n\n"], "break");
    try {
      const chunks: string[] = [];
      const o = await forwardToBackend(
        llama(b.url),
        chat,
        new AbortController().signal,
        sink(chunks, chunkBytes),
      );
      assert.equal(o.kind, "failed");
      assert.equal(chunks.join(""), HEAD + FINISH + "}\n\n");
    } finally {
      b.close();
    }
  });
}

Deno.test("issue 33 a backend not known to stay exact is not asked: the body goes as sent", async () => {
  const b = backendOnce([HEAD, "data: [DONE]\n\n"], "complete");
  try {
    const chunks: string[] = [];
    await forwardToBackend(
      { url: b.url, apiKey: null },
      chat,
      new AbortController().signal,
      sink(chunks, true),
    );
    assert.equal(await b.body, chat.body);
    assert.equal(chunks.join(""), HEAD + "data: [DONE]\n\n");
  } finally {
    b.close();
  }
});
