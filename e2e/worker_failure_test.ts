// Worker processes dying or draining under real requests, with another worker
// alive: what the client sees is a normal answer.
import assert from "node:assert/strict";
import { type Child, waitUntil } from "../shell/procs.ts";
import {
  answerWords,
  MODEL,
  withCluster,
  workerForwarding,
} from "./_cluster.ts";
import { openaiAt, streamedText } from "./_sdk.ts";

// max_concurrent 1 each, so the two requests' paths are easy to tell apart.
const WORKERS = [
  { name: "e2e-a", maxConcurrent: 1 },
  { name: "e2e-b", maxConcurrent: 1 },
];

Deno.test("C22 kill -9 of the worker running a non-streaming request: the request is requeued to the other worker and succeeds", async () => {
  await withCluster({ workers: WORKERS }, async (c) => {
    const client = openaiAt(c.serverUrl);
    // 40 words × 30 ms: the answer is ~1.2 s away when the worker dies.
    const answer = client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Hello!" }],
      max_tokens: 40,
    });
    const victim = await workerForwarding(c.workers);
    await waitUntil(
      "the backend to receive the request",
      async () => (await c.stats()).requests === 1,
    );
    const survivor = c.workers.find((w) => w !== victim)!;
    victim.kill("SIGKILL");
    const r = await answer;
    assert.equal(r.choices[0]?.message.content, answerWords(40));
    assert.notEqual((await victim.status).code, 0);
    const requestId = /request_id=(\S+)/.exec(
      victim.lines.find((l) => l.includes("forwarding request"))!,
    )![1]!;
    assert.ok(
      survivor.lines.some((l) =>
        l.includes("forwarding request") && l.includes(requestId)
      ),
      `the surviving worker never got ${requestId}`,
    );
    // The backend saw both attempts: the cut one and the one that answered.
    assert.equal((await c.stats()).requests, 2);
  });
});

Deno.test("C29 SIGTERM of the worker running a stream: the stream completes and the worker exits 0", async () => {
  await withCluster({ workers: WORKERS }, async (c) => {
    const client = openaiAt(c.serverUrl);
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Hello!" }],
      max_tokens: 30,
      stream: true,
    });
    let drained = null as Child | null;
    const text = await streamedText(stream, async (textSoFar) => {
      if (drained === null && textSoFar !== "") {
        drained = await workerForwarding(c.workers);
        drained.kill("SIGTERM");
      }
    });
    assert.ok(drained !== null, "no chunk arrived");
    assert.equal(text, answerWords(30));
    assert.equal((await drained.status).code, 0);
    // It drained with the stream in flight, rather than after it ended.
    assert.ok(
      drained.lines.some((l) => /graceful shutdown in_flight=1/.test(l)),
      drained.lines.join("\n"),
    );
    // One attempt only: the stream was not cut and restarted.
    assert.equal((await c.stats()).requests, 1);
  });
});
