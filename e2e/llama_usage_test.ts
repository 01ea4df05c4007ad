// Issue 26 with a REAL llama.cpp llama-server (../shared/llama): a stream's
// usage, as llama-server reports it, is what the relay's usage ledger records.
// Ignored (with a console message) where ../shared/llama is absent.
import assert from "node:assert/strict";
import type OpenAI from "openai";
import {
  LLAMA_MODEL,
  llamaTest,
  longPrompt,
  withLlamaCluster,
} from "./_llama.ts";
import { openaiAt } from "./_sdk.ts";
import { type UsageRecord, usageRecords } from "./_usage_records.ts";

const ADMIN = "e2e-llama-usage-admin";

async function lastRecord(serverUrl: string): Promise<UsageRecord> {
  return (await usageRecords(serverUrl, ADMIN, "limit=1"))[0]!;
}

async function streamText(url: string, body: unknown): Promise<string> {
  const r = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  assert.equal(r.status, 200);
  return await r.text();
}

/** A stream with what changes between calls (ids, times, measurements) blanked. */
function shape(sse: string): string {
  return sse.replaceAll(/"id":"[^"]*"/g, '"id":"X"')
    .replaceAll(/"created":\d+/g, '"created":0')
    .replaceAll(
      /"(cache_n|prompt_n|prompt_ms|prompt_per_token_ms|prompt_per_second|predicted_n|predicted_ms|predicted_per_token_ms|predicted_per_second)":[-0-9.e+]+/g,
      '"$1":0',
    );
}

llamaTest(
  "issue 26 a real llama-server stream's usage is recorded exactly",
  async (t) => {
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
        "issue 33 a chat stream without include_usage: recorded with llama-server's real counts, and the client gets what llama-server sends without the ask",
        async () => {
          const ask = (prompt: string) => ({
            model: LLAMA_MODEL,
            messages: [{ role: "user", content: prompt }],
            max_tokens: 100,
            temperature: 0,
            stream: true,
          });
          const prompt = longPrompt(700);
          const relayed = await streamText(
            `${c.serverUrl}/v1/chat/completions`,
            ask(prompt),
          );
          const rec = await lastRecord(c.serverUrl);
          // llama-server's own count of the same prompt (a non-streaming call
          // of one token reports it).
          const direct = await fetch(`${c.llama.url}/v1/chat/completions`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({
              ...ask(prompt),
              stream: false,
              max_tokens: 1,
            }),
          });
          const promptTokens = (await direct.json()).usage.prompt_tokens;
          assert.ok(promptTokens > 700, `prompt of ${promptTokens} tokens`);
          assert.equal(rec.prompt_tokens, promptTokens);
          assert.equal(rec.completion_tokens, 100);
          assert.equal(rec.estimated, false);
          // Byte for byte the shape llama-server sends unasked: no usage chunk,
          // the final chunk with its timings; only ids, times and measured
          // numbers differ from one call to the next.
          const unasked = await streamText(
            `${c.llama.url}/v1/chat/completions`,
            ask(prompt),
          );
          assert.doesNotMatch(relayed, /"usage"/);
          assert.equal(shape(relayed), shape(unasked));
        },
      );

      await t.step(
        'issue 33 a "metadata":{"include_usage":true} does not turn counting off: recorded with llama-server\'s real counts',
        async () => {
          const relayed = await streamText(
            `${c.serverUrl}/v1/chat/completions`,
            {
              model: LLAMA_MODEL,
              messages: [{
                role: "user",
                content: "Count me, metadata or not.",
              }],
              max_tokens: 12,
              temperature: 0,
              stream: true,
              metadata: { include_usage: true },
            },
          );
          assert.doesNotMatch(relayed, /"usage"/);
          const rec = await lastRecord(c.serverUrl);
          assert.ok((rec.prompt_tokens ?? 0) > 0, JSON.stringify(rec));
          assert.equal(rec.completion_tokens, 12);
          assert.equal(rec.estimated, false);
        },
      );
    }, { serverEnv: { MODELRELAY_ADMIN_TOKEN: ADMIN } });
  },
);
