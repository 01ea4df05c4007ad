// The official `@anthropic-ai/sdk` npm SDK against real processes: mock backend,
// server and two workers.
import Anthropic from "@anthropic-ai/sdk";
import assert from "node:assert/strict";
import { answerWords, MODEL, withCluster } from "./_cluster.ts";
import { anthropicAt } from "./_sdk.ts";

const WORKERS = [
  { name: "e2e-a", maxConcurrent: 4 },
  { name: "e2e-b", maxConcurrent: 4 },
];

Deno.test("anthropic SDK through the relay", async (t) => {
  await withCluster({ workers: WORKERS }, async (c) => {
    const client = anthropicAt(c.serverUrl);

    await t.step(
      "messages.create returns the answer as one text block",
      async () => {
        const m = await client.messages.create({
          model: MODEL,
          max_tokens: 7,
          messages: [{ role: "user", content: "Hello!" }],
        });
        assert.equal(m.type, "message");
        assert.equal(m.role, "assistant");
        const block = m.content[0];
        assert.ok(
          block?.type === "text",
          `content: ${JSON.stringify(m.content)}`,
        );
        assert.equal(block.text, answerWords(7));
      },
    );

    await t.step(
      "messages.stream yields text deltas and a final message",
      async () => {
        const stream = client.messages.stream({
          model: MODEL,
          max_tokens: 9,
          messages: [{ role: "user", content: "Hello!" }],
        });
        let text = "";
        stream.on("text", (delta) => {
          text += delta;
        });
        const final = await stream.finalMessage();
        assert.equal(text, answerWords(9));
        const block = final.content[0];
        assert.ok(block?.type === "text");
        assert.equal(block.text, answerWords(9));
      },
    );

    await t.step("a backend 400 surfaces as BadRequestError", async () => {
      const err = await client.messages.create({
        model: "error-400",
        max_tokens: 5,
        messages: [{ role: "user", content: "Hello!" }],
      }).then(() => null, (e: unknown) => e);
      assert.ok(err instanceof Anthropic.BadRequestError, `got ${err}`);
      assert.equal(err.status, 400);
    });
  });
});
