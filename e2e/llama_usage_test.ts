// Issue 26 with a REAL llama.cpp llama-server (../shared/llama): a stream's
// usage, as llama-server reports it, is what the relay's usage ledger records.
// Ignored (with a console message) where ../shared/llama is absent.
import assert from "node:assert/strict";
import type OpenAI from "openai";
import {
  LLAMA_ABSENT,
  LLAMA_MODEL,
  openaiAt,
  withLlamaCluster,
} from "./_llama.ts";

const ADMIN = "e2e-llama-usage-admin";

type Rec = {
  endpoint: string;
  worker: string | null;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  estimated: boolean;
};

async function lastRecord(serverUrl: string): Promise<Rec> {
  const r = await fetch(`${serverUrl}/admin/requests?limit=1`, {
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  assert.equal(r.status, 200);
  const body = await r.json() as { requests: Rec[] };
  return body.requests[0]!;
}

Deno.test({
  name: "issue 26 a real llama-server stream's usage is recorded exactly",
  ignore: LLAMA_ABSENT,
}, async (t) => {
  await withLlamaCluster(async (c) => {
    const openai = openaiAt(c.serverUrl);

    await t.step(
      "a chat stream with include_usage: the record equals llama-server's usage",
      async () => {
        const stream = await openai.chat.completions.create({
          model: LLAMA_MODEL,
          messages: [{ role: "user", content: "Count the tokens of this." }],
          max_tokens: 12,
          temperature: 0,
          stream: true,
          stream_options: { include_usage: true },
        });
        let usage: OpenAI.CompletionUsage | null | undefined = null;
        for await (const chunk of stream) usage = chunk.usage ?? usage;
        assert.ok(usage !== null && usage !== undefined, "no usage chunk");
        const rec = await lastRecord(c.serverUrl);
        assert.equal(rec.endpoint, "/v1/chat/completions");
        assert.equal(rec.worker, "e2e-llama");
        assert.equal(rec.prompt_tokens, usage.prompt_tokens);
        assert.equal(rec.completion_tokens, usage.completion_tokens);
        assert.equal(rec.estimated, false);
      },
    );

    await t.step(
      "a chat stream without include_usage: recorded as llama-server's final chunk says, else as its content deltas",
      async () => {
        const r = await fetch(`${c.serverUrl}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            model: LLAMA_MODEL,
            messages: [{ role: "user", content: "Hello there!" }],
            max_tokens: 10,
            temperature: 0,
            stream: true,
          }),
        });
        assert.equal(r.status, 200);
        let usage: { prompt_tokens: number; completion_tokens: number } | null =
          null;
        let deltas = 0;
        for (const line of (await r.text()).split("\n")) {
          if (!line.startsWith("data: {")) continue;
          const event = JSON.parse(line.slice(6));
          if (event.usage) usage = event.usage;
          const content = event.choices?.[0]?.delta?.content;
          if (typeof content === "string" && content !== "") deltas++;
        }
        const rec = await lastRecord(c.serverUrl);
        if (usage !== null) {
          assert.equal(rec.prompt_tokens, usage.prompt_tokens);
          assert.equal(rec.completion_tokens, usage.completion_tokens);
          assert.equal(rec.estimated, false);
        } else {
          assert.equal(rec.completion_tokens, deltas);
          assert.equal(rec.estimated, true);
        }
        assert.ok(deltas >= 1);
      },
    );
  }, { serverEnv: { MODELRELAY_ADMIN_TOKEN: ADMIN } });
});
