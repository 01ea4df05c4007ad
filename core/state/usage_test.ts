import assert from "node:assert/strict";
import {
  addRequest,
  addWorker,
  chunk,
  newState,
  ofKind,
  step,
} from "../_testing.ts";
import { countDeltas, countsDeltas } from "./usage.ts";

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
  assert.equal(countsDeltas("/v1/chat/completions", true, "{}"), true);
  assert.equal(
    countsDeltas(
      "/v1/chat/completions",
      true,
      '{"stream_options":{"include_usage": true}}',
    ),
    false,
  );
  assert.equal(
    countsDeltas(
      "/v1/chat/completions",
      true,
      '{"stream_options":{"include_usage":false}}',
    ),
    true,
  );
  assert.equal(countsDeltas("/v1/chat/completions", false, "{}"), false);
  assert.equal(countsDeltas("/v1/messages", true, "{}"), false);
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
