// C60 (issue 24.1), the server's half: an original-dialect worker forwards a
// backend's reads as they come, so a stream can break with half an event
// already sent. The server never glues its error event onto that half: it
// cuts the client's connection instead. A stream that broke between events
// still ends with the error event.
import assert from "node:assert/strict";
import OpenAI from "openai";
import {
  chatBody,
  postChat,
  registeredWorker,
  startTestServer,
  type TestServer,
  type TestWorker,
} from "./_test_helpers.ts";

const FIRST =
  'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m1","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n';

/** An original (Rust) worker's frames for a backend that breaks after `chunks`. */
async function breakAfter(w: TestWorker, chunks: string[]): Promise<void> {
  const req = await w.next("request");
  for (const chunk of chunks) {
    w.send({ type: "response_chunk", request_id: req.request_id, chunk });
  }
  // What the original worker sends when its backend call fails: a 502.
  w.complete(
    req,
    502,
    '{"error":{"message":"backend response failed","type":"backend_error","code":"backend_error"}}',
  );
}

/** Everything the client received, and whether the body ended cleanly. */
async function readAll(
  res: Response,
): Promise<{ text: string; clean: boolean }> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return { text, clean: true };
      text += decoder.decode(value, { stream: true });
    }
  } catch {
    return { text, clean: false };
  }
}

async function withServer(
  body: (server: TestServer, w: TestWorker) => Promise<void>,
): Promise<void> {
  const server = await startTestServer();
  try {
    const w = await registeredWorker(server);
    try {
      await body(server, w);
    } finally {
      await w.close();
    }
  } finally {
    await server.close();
  }
}

Deno.test("issue 24.1: an original worker's break mid-event cuts the client's connection, no error event glued onto half an event", async () => {
  await withServer(async (server, w) => {
    const res = postChat(server, chatBody("m1", true));
    await breakAfter(w, [FIRST, 'data: {"choices"']);
    const got = await readAll(await res);
    assert.equal(got.clean, false, `the body ended cleanly: ${got.text}`);
    // The half event may or may not have left before the cut; nothing follows it.
    assert.ok(
      got.text === FIRST || got.text === FIRST + 'data: {"choices"',
      got.text,
    );
  });
});

Deno.test("issue 24.1: the openai SDK sees a broken connection there, never a malformed event (SyntaxError)", async () => {
  await withServer(async (server, w) => {
    const client = new OpenAI({
      baseURL: `${server.url}/v1`,
      apiKey: "unused",
      maxRetries: 0,
      timeout: 10_000,
    });
    const stream = client.chat.completions.create({
      model: "m1",
      stream: true,
      messages: [{ role: "user", content: "hi" }],
    });
    await breakAfter(w, [FIRST, 'data: {"choices"']);
    const got: string[] = [];
    const error = await (async () => {
      try {
        for await (const c of await stream) {
          got.push(c.choices[0]?.delta.content ?? "");
        }
        return null;
      } catch (e) {
        return e;
      }
    })();
    assert.deepEqual(got, ["Hi"]);
    assert.ok(error !== null, "the stream ended as if complete");
    assert.ok(!(error instanceof SyntaxError), `SyntaxError: ${error}`);
  });
});

Deno.test("issue 24.1: an original worker's break between events still ends the stream with the error event", async () => {
  await withServer(async (server, w) => {
    const res = postChat(server, chatBody("m1", true));
    await breakAfter(w, [FIRST]);
    const got = await readAll(await res);
    assert.equal(got.clean, true);
    assert.ok(got.text.startsWith(FIRST), got.text);
    const last = got.text.slice(FIRST.length);
    assert.match(last, /^data: \{"error":/);
    assert.ok(last.endsWith("\n\n"), last);
  });
});
