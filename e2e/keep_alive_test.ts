// Issue 30, "Waiting clients": a stream that waits for a model to load hears
// from the relay before the backend's first byte. Real server and worker
// processes; the backend is a swapping fake (mock/swapping.ts) whose load
// takes seconds.
import assert from "node:assert/strict";
import { type Box, FAKE_MODELS, withFleet } from "./_fleet.ts";
import { startSwappingBackend } from "../mock/swapping.ts";
import { waitUntil } from "../shell/procs.ts";
import { anthropicAt, openaiAt, streamedText } from "./_sdk.ts";
import { postChat } from "./_post_chat.ts";

const ANSWER = "Loaded at last and streaming every word.";

async function slowBox(
  loadDelayMs: number,
  more: { chunkDelayMs?: number; loaded?: string[] } = {},
): Promise<
  Box & { loading(): string | null; resident(): string[]; inFlight(): number }
> {
  const b = await startSwappingBackend({
    dialect: "ollama",
    models: [...FAKE_MODELS],
    loadDelayMs,
    chunkDelayMs: more.chunkDelayMs ?? 5,
    answer: ANSWER,
    ...(more.loaded === undefined ? {} : { loaded: more.loaded }),
  });
  return {
    url: b.url,
    loads: () => b.stats.loads,
    loading: b.loading,
    resident: b.resident,
    inFlight: b.inFlight,
    close: b.close,
  };
}

/** A streamed chat completion read as raw bytes: every line, comments included. */
async function rawStream(
  serverUrl: string,
  headers: Record<string, string> = {},
  model: string = FAKE_MODELS[0],
): Promise<{ status: number; lines: string[] }> {
  const res = await postChat(serverUrl, {
    model,
    stream: true,
    messages: [{ role: "user", content: "hi" }],
  }, { headers });
  const text = await res.text();
  return {
    status: res.status,
    lines: text.split("\n").filter((l) => l !== ""),
  };
}

/** The content deltas of an SSE chat stream's data lines, joined. */
function contentOf(lines: string[]): string {
  return lines.filter((l) => l.startsWith("data: {")).map((l) =>
    JSON.parse(l.slice(6)).choices[0]?.delta?.content ?? ""
  ).join("");
}

Deno.test("SSE_KEEPALIVE_SECS=2: an openai-SDK stream that waits 7 s for a load completes with exactly the backend's content", async () => {
  const box = await slowBox(7_000);
  await withFleet([box], async ({ serverUrl }) => {
    const client = openaiAt(serverUrl, { timeoutMs: 60_000 });
    const started = Date.now();
    const stream = await client.chat.completions.create({
      model: FAKE_MODELS[0],
      messages: [{ role: "user", content: "hi" }],
      stream: true,
    });
    const text = await streamedText(stream);
    assert.equal(text, ANSWER);
    assert.ok(Date.now() - started >= 7_000, "the load was not waited for");
    assert.equal(box.loads(), 1);
  }, { serverEnv: { SSE_KEEPALIVE_SECS: "2" } });
});

Deno.test("SSE_KEEPALIVE_SECS=1: an Anthropic-SDK stream that waits for a load skips the comment lines and reads exactly the backend's text", async () => {
  const box = await slowBox(3_000);
  await withFleet([box], async ({ serverUrl }) => {
    const client = anthropicAt(serverUrl, { timeoutMs: 60_000 });
    const stream = client.messages.stream({
      model: FAKE_MODELS[0],
      // The fake answers this many words: its whole answer.
      max_tokens: ANSWER.split(" ").length,
      messages: [{ role: "user", content: "hi" }],
    });
    let text = "";
    stream.on("text", (t) => text += t);
    await stream.finalMessage();
    assert.equal(text, ANSWER);
    assert.equal(box.loads(), 1);
  }, { serverEnv: { SSE_KEEPALIVE_SECS: "1" } });
});

Deno.test("SSE_KEEPALIVE_SECS=2 seen by a raw client: `: keep-alive` lines while the load runs, then the backend's events", async () => {
  const box = await slowBox(5_000);
  await withFleet([box], async ({ serverUrl }) => {
    const { status, lines } = await rawStream(serverUrl);
    assert.equal(status, 200);
    const firstData = lines.findIndex((l) => l.startsWith("data: "));
    const before = lines.slice(0, firstData);
    assert.ok(before.length >= 2, lines.join("\n"));
    assert.ok(before.every((l) => l === ": keep-alive"), before.join("\n"));
    assert.ok(lines.slice(firstData).every((l) => !l.startsWith(":")));
    assert.equal(contentOf(lines), ANSWER);
    assert.equal(lines.at(-1), "data: [DONE]");
  }, { serverEnv: { SSE_KEEPALIVE_SECS: "2" } });
});

Deno.test("X-ModelRelay-Progress: 1 seen by a raw client: `: loading model=M` while its worker loads, `: queued position=N` while it waits in the queue", async () => {
  const box = await slowBox(2_000);
  await withFleet([box], async ({ serverUrl }) => {
    // The worker has reported what its backend holds (nothing yet).
    await waitUntil("the relay to know the box holds nothing", async () => {
      const res = await fetch(`${serverUrl}/v1/models/${FAKE_MODELS[0]}`);
      return (await res.json()).status === "available";
    });
    const progress = { "x-modelrelay-progress": "1" };
    // The first takes the worker's only slot and its model loads there.
    const first = rawStream(serverUrl, progress);
    await waitUntil(
      "the box to load for the first",
      () => Promise.resolve(box.loading() !== null),
    );
    const second = await rawStream(serverUrl, progress);
    assert.equal(second.status, 200);
    const queued = second.lines.filter((l) => l.startsWith(":"));
    assert.equal(queued[0], ": queued position=1", second.lines.join("\n"));
    assert.equal(contentOf(second.lines), ANSWER);
    const loading = (await first).lines.filter((l) => l.startsWith(":"));
    assert.deepEqual(loading, [`: loading model=${FAKE_MODELS[0]}`]);
    assert.equal(contentOf((await first).lines), ANSWER);
    assert.equal(box.loads(), 1);
  }, { maxConcurrent: 1 });
});

Deno.test("X-ModelRelay-Progress: 1 on one stream: `: queued position=1` while the only worker is busy with another model, then `: loading model=M` as it swaps", async () => {
  const [A, B] = FAKE_MODELS;
  const box = await slowBox(1_000, { chunkDelayMs: 150, loaded: [A] });
  await withFleet([box], async ({ serverUrl }) => {
    await waitUntil("the relay to know the box holds A", async () => {
      const res = await fetch(`${serverUrl}/v1/models/${A}`);
      return (await res.json()).status === "loaded";
    });
    // A takes the only slot for about a second.
    const first = rawStream(serverUrl, {}, A);
    await waitUntil(
      "the box to stream A",
      () => Promise.resolve(box.inFlight() === 1),
    );
    const second = await rawStream(serverUrl, {
      "x-modelrelay-progress": "1",
    }, B);
    assert.equal(second.status, 200);
    assert.deepEqual(
      second.lines.filter((l) => l.startsWith(":")),
      [": queued position=1", `: loading model=${B}`],
      second.lines.join("\n"),
    );
    assert.equal(contentOf(second.lines), ANSWER);
    assert.equal(contentOf((await first).lines), ANSWER);
    assert.deepEqual(box.resident(), [B]);
  }, { maxConcurrent: 1 });
});
