// Issue 24, the worker's half, with real processes: a server and a worker, each
// a `deno run` child, in front of raw TCP backends (e2e/_raw_backend.ts) that
// misbehave on the wire exactly as the review's did. Each test is named after
// the item it proves.
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { httpChunk, rawBackend } from "./_raw_backend.ts";
import { startServer, startWorker, withChildren } from "./_faults.ts";
import { anthropicAt, openaiAt } from "./_sdk.ts";
import { postChat } from "./_post_chat.ts";

const MODEL = "raw-model";

const SSE_HEAD =
  "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

/** What `run` threw, or null when it did not. */
async function rejection(run: () => Promise<void>): Promise<unknown> {
  try {
    await run();
    return null;
  } catch (e) {
    return e;
  }
}

Deno.test("issue 24.1: a break mid-event reaches the openai and Anthropic SDKs as an APIError carrying backend_stream_broken", async () => {
  const backend = await rawBackend((socket, r) => {
    const anthropic = r.path === "/v1/messages";
    const first = anthropic
      ? 'event: message_start\ndata: {"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"raw-model","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":0}}}\n\n'
      : 'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"raw-model","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n';
    const half = anthropic
      ? 'event: content_block_delta\ndata: {"type"'
      : 'data: {"choices"';
    socket.write(SSE_HEAD + httpChunk(first));
    setTimeout(() => socket.write(httpChunk(half)), 50);
    setTimeout(() => socket.resetAndDestroy(), 150);
  }, [MODEL]);
  try {
    await withChildren(async (started) => {
      const server = await startServer(started);
      await startWorker(started, "breaks", server, backend.url);

      const openai = openaiAt(server);
      const got: string[] = [];
      const openaiError = await rejection(async () => {
        const stream = await openai.chat.completions.create({
          model: MODEL,
          stream: true,
          messages: [{ role: "user", content: "Hello!" }],
        });
        for await (const c of stream) {
          got.push(c.choices[0]?.delta.content ?? "");
        }
      });
      assert.deepEqual(got, ["Hi"]);
      assert.ok(
        openaiError instanceof OpenAI.APIError,
        `openai SDK threw ${String(openaiError)}`,
      );
      assert.equal(openaiError.code, "backend_stream_broken");

      const anthropic = anthropicAt(server);
      const events: string[] = [];
      const anthropicError = await rejection(async () => {
        const stream = await anthropic.messages.create({
          model: MODEL,
          max_tokens: 5,
          stream: true,
          messages: [{ role: "user", content: "Hello!" }],
        });
        for await (const e of stream) events.push(e.type);
      });
      assert.deepEqual(events, ["message_start"]);
      assert.ok(
        anthropicError instanceof Anthropic.APIError,
        `Anthropic SDK threw ${String(anthropicError)}`,
      );
      assert.equal(
        (anthropicError.error as { error?: { code?: string } }).error?.code,
        "backend_stream_broken",
      );
    });
  } finally {
    await backend.close();
  }
});

const JSON_ANSWER =
  '{"id":"c1","object":"chat.completion","created":1,"model":"raw-model","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}';

/** POST /v1/chat/completions (not streaming): status, body text. */
async function ask(server: string): Promise<{ status: number; text: string }> {
  const res = await postChat(server, {
    model: MODEL,
    messages: [{ role: "user", content: "Hello!" }],
  });
  return { status: res.status, text: await res.text() };
}

Deno.test("issue 24.5: a complete answer followed by stray bytes is delivered once and its connection closed, never reused", async () => {
  const strays = [
    // Content-Length 5 bytes short of what is sent.
    `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${JSON_ANSWER.length}\r\n\r\n${JSON_ANSWER}oops!`,
    // A chunked body, then bytes after its last chunk.
    `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n${
      httpChunk(JSON_ANSWER)
    }0\r\n\r\nGARBAGE`,
  ];
  for (const answer of strays) {
    const backend = await rawBackend((socket) => socket.write(answer), [MODEL]);
    try {
      await withChildren(async (started) => {
        const server = await startServer(started);
        await startWorker(started, "strays", server, backend.url);
        for (let i = 1; i <= 3; i++) {
          const r = await ask(server);
          assert.equal(r.status, 200, r.text);
          assert.equal(r.text, JSON_ANSWER);
        }
        const posts = backend.requests.filter((r) => r.method === "POST");
        assert.equal(posts.length, 3, "each inference ran once");
        // A connection per request: none was handed on after its stray bytes.
        assert.equal(new Set(posts.map((r) => r.conn)).size, 3);
        assert.ok(posts.every((r) => r.onSocket === 1));
      });
    } finally {
      await backend.close();
    }
  }
});

Deno.test("issue 24.5: a backend answering invalid HTTP gets one 502 backend_protocol_error, no rerun, and stays in routing", async () => {
  let garbage = true;
  const backend = await rawBackend((socket) => {
    if (garbage) socket.end("HTTP/1.1 2x0 NOPE\r\n\r\n");
    else {
      socket.write(
        `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${JSON_ANSWER.length}\r\n\r\n${JSON_ANSWER}`,
      );
    }
  }, [MODEL]);
  try {
    await withChildren(async (started) => {
      const server = await startServer(started);
      await startWorker(started, "garbage", server, backend.url);
      for (let i = 0; i < 4; i++) {
        const r = await ask(server);
        assert.equal(r.status, 502, r.text);
        assert.equal(JSON.parse(r.text).error.code, "backend_protocol_error");
      }
      const posts = () =>
        backend.requests.filter((r) => r.method === "POST").length;
      assert.equal(posts(), 4, "one backend call per request, no reruns");
      // Four in a row would have opened the unavailability circuit (3 do):
      // the worker is still routed to, at once.
      garbage = false;
      const t0 = performance.now();
      const ok = await ask(server);
      assert.equal(ok.status, 200, ok.text);
      assert.ok(performance.now() - t0 < 3_000, "waited for a circuit");
    });
  } finally {
    await backend.close();
  }
});

/** A chat answer whose content names the question it answers. */
function answerTo(question: string): string {
  return JSON.stringify({
    id: "c1",
    object: "chat.completion",
    created: 1,
    model: MODEL,
    choices: [{
      index: 0,
      message: { role: "assistant", content: `answer to ${question}` },
      finish_reason: "stop",
    }],
  });
}

function http200(json: string): string {
  return `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${json.length}\r\n\r\n${json}`;
}

Deno.test("issue 24.6: a late unsolicited answer on a kept-alive connection never becomes another request's answer", async () => {
  /** Each connection's last answer, which a buggy backend sends twice. */
  const last = new Map<number, string>();
  const backend = await rawBackend((socket, r) => {
    if (r.method !== "POST") {
      return socket.write(
        "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
      );
    }
    const question = JSON.parse(r.body).messages[0].content as string;
    const answer = http200(answerTo(question));
    if (r.onSocket > 1) {
      // The previous answer again, at once, then this one: on a reused
      // connection the first looks exactly like this request's answer.
      socket.write(last.get(r.conn)!);
      setTimeout(() => socket.write(answer), 50);
    } else if (
      r.conn === backend.requests.find((q) => q.method === "POST")?.conn
    ) {
      // The very first answer comes with a stray copy of itself behind it.
      socket.write(answer + answer);
    } else socket.write(answer);
    last.set(r.conn, answer);
  }, [MODEL]);
  try {
    await withChildren(async (started) => {
      const server = await startServer(started);
      await startWorker(started, "late", server, backend.url);
      const wrong: string[] = [];
      for (let i = 1; i <= 30; i++) {
        const res = await postChat(server, {
          model: MODEL,
          messages: [{ role: "user", content: `q${i}` }],
        });
        const text = await res.text();
        assert.equal(res.status, 200, text);
        const content = JSON.parse(text).choices[0].message.content;
        if (content !== `answer to q${i}`) wrong.push(`q${i} got "${content}"`);
      }
      assert.deepEqual(wrong, []);
    });
  } finally {
    await backend.close();
  }
});

Deno.test("issue 24.7: a backend that never sends a response head frees the slot after BACKEND_HEAD_TIMEOUT_SECS and the request runs again", async () => {
  let hung: import("node:net").Socket | null = null;
  let hungClosedAt = 0;
  const backend = await rawBackend((socket, r) => {
    if (r.method !== "POST") {
      return socket.write(
        "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
      );
    }
    if (hung === null) {
      // Takes the first request and never answers it.
      hung = socket;
      socket.on("close", () => hungClosedAt = performance.now());
      return;
    }
    socket.write(http200(answerTo("again")));
  }, [MODEL]);
  try {
    await withChildren(async (started) => {
      const server = await startServer(started);
      await startWorker(started, "hangs", server, backend.url, {
        BACKEND_HEAD_TIMEOUT_SECS: "1",
        MAX_CONCURRENT: "1",
      });
      const t0 = performance.now();
      const res = await postChat(server, {
        model: MODEL,
        messages: [{ role: "user", content: "q1" }],
      }, { signal: AbortSignal.timeout(20_000) });
      const text = await res.text();
      // The one slot was freed: the requeued request ran on the same worker.
      assert.equal(res.status, 200, text);
      assert.equal(
        JSON.parse(text).choices[0].message.content,
        "answer to again",
      );
      const waited = performance.now() - t0;
      assert.ok(
        waited >= 900 && waited < 15_000,
        `answered after ${waited} ms`,
      );
      assert.ok(hungClosedAt > 0, "the worker closed the silent connection");
    });
  } finally {
    await backend.close();
  }
});
