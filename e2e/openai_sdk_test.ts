// The official `openai` npm SDK against real processes: mock backend, server and
// two workers. What a client written for OpenAI sees through the relay.
import assert from "node:assert/strict";
import OpenAI from "openai";
import { waitUntil } from "../shell/procs.ts";
import { answerWords, MODEL, withCluster } from "./_cluster.ts";
import { openaiAt, streamedText } from "./_sdk.ts";

const WORKERS = [
  { name: "e2e-a", maxConcurrent: 4 },
  { name: "e2e-b", maxConcurrent: 4 },
];

Deno.test("openai SDK through the relay", async (t) => {
  await withCluster({ workers: WORKERS }, async (c) => {
    const client = openaiAt(c.serverUrl);

    await t.step(
      "chat.completions.create without stream returns the whole answer",
      async () => {
        const r = await client.chat.completions.create({
          model: MODEL,
          messages: [{ role: "user", content: "Hello!" }],
          max_tokens: 5,
        });
        assert.equal(r.object, "chat.completion");
        assert.equal(r.choices[0]?.message.content, answerWords(5));
      },
    );

    await t.step(
      "chat.completions.create with stream yields every word in order",
      async () => {
        const stream = await client.chat.completions.create({
          model: MODEL,
          messages: [{ role: "user", content: "Hello!" }],
          stream: true,
        });
        let chunks = 0;
        const text = await streamedText(stream, () => {
          chunks++;
        });
        assert.equal(text, answerWords(17));
        assert.ok(chunks >= 17, `only ${chunks} chunks`);
      },
    );

    await t.step(
      "responses.create without stream returns output_text",
      async () => {
        const r = await client.responses.create({
          model: MODEL,
          input: "Hello!",
          max_output_tokens: 6,
        });
        assert.equal(r.output_text, answerWords(6));
      },
    );

    await t.step(
      "responses.create with stream yields output_text deltas and completes",
      async () => {
        const stream = await client.responses.create({
          model: MODEL,
          input: "Hello!",
          max_output_tokens: 6,
          stream: true,
        });
        let text = "";
        let completed = false;
        for await (const event of stream) {
          if (event.type === "response.output_text.delta") text += event.delta;
          if (event.type === "response.completed") completed = true;
        }
        assert.equal(text, answerWords(6));
        assert.ok(completed, "no response.completed event");
      },
    );

    await t.step("models.list lists the model the workers serve", async () => {
      const ids: string[] = [];
      for await (const m of client.models.list()) ids.push(m.id);
      assert.ok(ids.includes(MODEL), `models: ${ids.join(", ")}`);
    });

    await t.step(
      "aborting a stream mid-way reaches the backend as an abort",
      async () => {
        const before = await c.stats();
        const stream = await client.chat.completions.create({
          model: MODEL,
          messages: [{ role: "user", content: "Hello!" }],
          max_tokens: 500, // 500 words × 30 ms: far longer than this step.
          stream: true,
        });
        let seen = 0;
        for await (const chunk of stream) {
          if (chunk.choices[0]?.delta.content) seen++;
          if (seen === 2) break; // Leaving the loop aborts the request.
        }
        stream.controller.abort();
        await waitUntil("the backend to see the abort", async () => {
          const s = await c.stats();
          return s.aborted > before.aborted && s.openStreams === 0;
        }, 10_000);
        assert.equal(
          (await c.stats()).completedStreams,
          before.completedStreams,
        );
      },
    );

    await t.step(
      "a backend 400 surfaces as APIError with status 400 and the backend's message",
      async () => {
        const err = await client.chat.completions.create({
          model: "error-400",
          messages: [{ role: "user", content: "Hello!" }],
        }).then(() => null, (e: unknown) => e);
        assert.ok(err instanceof OpenAI.APIError, `got ${err}`);
        assert.equal(err.status, 400);
        assert.match(err.message, /mock backend answered 400/);
      },
    );

    await t.step(
      "a backend 404 on a stream surfaces as APIError with status 404",
      async () => {
        const err = await client.chat.completions.create({
          model: "error-404",
          messages: [{ role: "user", content: "Hello!" }],
          stream: true,
        }).then(() => null, (e: unknown) => e);
        assert.ok(err instanceof OpenAI.NotFoundError, `got ${err}`);
        assert.equal(err.status, 404);
      },
    );
  });
});
