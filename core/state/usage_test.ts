import assert from "node:assert/strict";
import {
  addRequest,
  addWorker,
  chunk,
  complete,
  newState,
  ofKind,
  requestEvent,
  step,
} from "../_testing.ts";
import { countDeltas, countsDeltas, tokenAskOf } from "./usage.ts";

const enc = new TextEncoder();

Deno.test("issue 26 content deltas are counted in text and in bytes alike, empty and null ones not", () => {
  const sse =
    'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n' +
    'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n' +
    'data: {"choices":[{"delta":{"content": "lo"}}]}\n\n' +
    'data: {"choices":[{"delta":{"content":"\\""}}]}\n\n' +
    'data: {"choices":[{"delta":{"content":null},"finish_reason":"stop"}]}\n\n' +
    "data: [DONE]\n\n";
  assert.equal(countDeltas(sse, "/v1/chat/completions"), 3);
  assert.equal(countDeltas(enc.encode(sse), "/v1/chat/completions"), 3);
  const completions =
    'data: {"choices":[{"text":"a"}]}\n\ndata: {"choices":[{"text":"b"}]}\n\n';
  assert.equal(countDeltas(completions, "/v1/completions"), 2);
  assert.equal(countDeltas(enc.encode(completions), "/v1/completions"), 2);
});

Deno.test("issue 26 only chat and completions streams that did not ask for usage are counted", () => {
  assert.equal(countsDeltas("/v1/chat/completions", true, false), true);
  assert.equal(countsDeltas("/v1/chat/completions", true, true), false);
  assert.equal(countsDeltas("/v1/completions", true, false), true);
  assert.equal(countsDeltas("/v1/chat/completions", false, false), false);
  assert.equal(countsDeltas("/v1/messages", true, false), false);
});

Deno.test("issue 33 only the parsed stream_options.include_usage asks for usage; a metadata field of that name does not", () => {
  const ask = (body: unknown) =>
    tokenAskOf(body as Record<string, unknown>).usageAsked;
  assert.equal(ask({ stream_options: { include_usage: true } }), true);
  assert.equal(ask({ stream_options: { include_usage: false } }), false);
  assert.equal(ask({ metadata: { include_usage: true } }), false);
  assert.equal(ask({ include_usage: true }), false);
  assert.equal(ask({ stream_options: { include_usage: "true" } }), false);
  assert.equal(ask({ stream_options: null }), false);
});

Deno.test("issue 33 the prompt estimate counts the text of the prompt fields, four characters a token, media not", () => {
  const ask = tokenAskOf({
    model: "a-long-model-name-that-is-not-prompt",
    messages: [
      { role: "system", content: "12345678" },
      {
        role: "user",
        content: [
          { type: "text", text: "1234" },
          { type: "image_url", image_url: { url: "data:" + "A".repeat(999) } },
        ],
      },
    ],
    max_completion_tokens: 7,
  });
  // "system" + "12345678" + "user" + "text" + "1234" + "image_url" = 35 chars
  assert.equal(ask.promptEstimate, 9);
  assert.equal(ask.maxTokens, 7);
  assert.equal(tokenAskOf({ prompt: "abcd" }).promptEstimate, 1);
  assert.equal(tokenAskOf({ input: "abcde" }).promptEstimate, 2);
  assert.equal(tokenAskOf({ max_tokens: -1 }).maxTokens, null);
  assert.equal(tokenAskOf({ max_output_tokens: 3 }).maxTokens, 3);
});

Deno.test("issue 33 an estimated stream records its prompt estimate with its deltas", () => {
  const state = newState();
  addWorker(state, "w1");
  step(state, {
    ...requestEvent(state, "r1", { stream: true }),
    tokenAsk: { usageAsked: false, promptEstimate: 12, maxTokens: null },
  });
  chunk(state, "w1", "r1", 'data: {"choices":[{"delta":{"content":"x"}}]}\n\n');
  const effects = complete(state, "w1", "r1");
  const f = ofKind(effects, "requestFinished")[0]!;
  assert.deepEqual(f.usage, {
    prompt: 12,
    completion: 1,
    cached: null,
    estimated: true,
  });
});

Deno.test("issue 26 the backend's counts win over the estimate, and the record names the worker and usage", () => {
  const state = newState();
  addWorker(state, "w1", { name: "gpu-a" });
  addRequest(state, "r1", { stream: true });
  chunk(state, "w1", "r1", 'data: {"choices":[{"delta":{"content":"x"}}]}\n\n');
  const effects = step(state, {
    kind: "completeReceived",
    atMs: state.nowMs,
    workerId: "w1",
    requestId: "r1",
    statusCode: 200,
    headers: { "x-cache-hit": "true", "x-cache-tokens-reused": "7" },
    body: "",
    tokenCounts: {
      prompt_tokens: 11,
      completion_tokens: null,
      total_tokens: 20,
    },
  });
  const f = ofKind(effects, "requestFinished")[0]!;
  assert.equal(f.workerName, "gpu-a");
  assert.deepEqual(f.usage, {
    prompt: 11,
    completion: 9,
    cached: 7,
    estimated: false,
  });
});
