// Issue 33: the worker's usage ask. Streams as llama-server (captured from the
// real binary, ids shortened), vLLM and Ollama send them with and without the
// ask: with the usage chunk taken out (and llama-server's timings put back),
// the client's bytes are those of the unasked stream.
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import {
  asksUsageOn,
  flavourOf,
  flavourOfKind,
  newUsageByteStrip,
  newUsageStrip,
  withUsageAsk,
} from "./usage_ask.ts";

const LLAMA_HEAD =
  'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1,"id":"c1","model":"tiny","system_fingerprint":"b0","object":"chat.completion.chunk"}\n\n' +
  'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"catch"}}],"created":1,"id":"c1","model":"tiny","system_fingerprint":"b0","object":"chat.completion.chunk"}\n\n';
const TIMINGS =
  '"timings":{"cache_n":0,"prompt_n":29,"prompt_ms":2.087,"predicted_n":1,"predicted_per_second":1980.1980198019803}';
const LLAMA_FINISH =
  'data: {"choices":[{"finish_reason":"length","index":0,"delta":{}}],"created":1,"id":"c1","model":"tiny","system_fingerprint":"b0","object":"chat.completion.chunk"';
const LLAMA_UNASKED = LLAMA_HEAD + LLAMA_FINISH + "," + TIMINGS +
  "}\n\ndata: [DONE]\n\n";
const LLAMA_ASKED = LLAMA_HEAD + LLAMA_FINISH + "}\n\n" +
  'data: {"choices":[],"created":1,"id":"c1","model":"tiny","system_fingerprint":"b0","object":"chat.completion.chunk","usage":{"completion_tokens":1,"prompt_tokens":29,"total_tokens":30,"prompt_tokens_details":{"cached_tokens":0}},' +
  TIMINGS + "}\n\ndata: [DONE]\n\n";

const VLLM_UNASKED =
  'data: {"id":"v1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n' +
  'data: {"id":"v1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}\n\n' +
  "data: [DONE]\n\n";
const VLLM_ASKED = VLLM_UNASKED.replace(
  "data: [DONE]",
  'data: {"id":"v1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":7,"total_tokens":8,"completion_tokens":1}}\n\ndata: [DONE]',
);

/** Every way a stream may be cut into reads of whole events. */
function cuts(sse: string): string[][] {
  const events = sse.split(/(?<=\n\n)/);
  const out: string[][] = [[sse], events];
  for (let i = 1; i < events.length; i++) {
    out.push([events.slice(0, i).join(""), events.slice(i).join("")]);
  }
  return out;
}

function stripText(reads: string[]): { out: string; removed: string[] } {
  const removed: string[] = [];
  const s = newUsageStrip((e) => removed.push(e));
  let out = "";
  for (const r of reads) out += s.pass(r);
  return { out: out + s.end(), removed };
}

function stripBytes(reads: string[]): { out: string; removed: string[] } {
  const removed: string[] = [];
  const s = newUsageByteStrip((e) => removed.push(e));
  const out: Buffer[] = [];
  for (const r of reads) out.push(s.pass(Buffer.from(r)));
  out.push(s.end());
  return { out: Buffer.concat(out).toString(), removed };
}

/**
 * Each strip, on every cut of `asked` into reads, gives `unasked` and takes
 * out one usage chunk (matching `usage` where given).
 */
function assertStripped(asked: string, unasked: string, usage?: RegExp) {
  for (const strip of [stripText, stripBytes]) {
    for (const reads of cuts(asked)) {
      const { out, removed } = strip(reads);
      assert.equal(out, unasked);
      assert.equal(removed.length, 1);
      if (usage !== undefined) assert.match(removed[0]!, usage);
    }
  }
}

Deno.test("issue 33 llama-server: without its usage chunk, and with its timings back on the final chunk, the asked stream is the unasked one, however it is read", () => {
  assertStripped(LLAMA_ASKED, LLAMA_UNASKED, /"prompt_tokens":29/);
});

Deno.test("issue 33 vLLM: the asked stream without its usage chunk is the unasked one", () => {
  assertStripped(VLLM_ASKED, VLLM_UNASKED);
});

Deno.test("issue 33 a stream without a usage chunk passes unchanged; a held final chunk is let go at the end", () => {
  for (const strip of [stripText, stripBytes]) {
    assert.equal(strip([LLAMA_UNASKED]).out, LLAMA_UNASKED);
    const cut = LLAMA_HEAD + LLAMA_FINISH + "}\n\n";
    assert.equal(strip([cut]).out, cut);
  }
});

Deno.test("issue 33 the ask is added as the body's first member, only to a streaming JSON object without stream_options", () => {
  assert.equal(
    withUsageAsk('{"model":"m","stream":true}'),
    '{"stream_options":{"include_usage":true},"model":"m","stream":true}',
  );
  assert.equal(
    withUsageAsk(' {\n"stream": true}'),
    ' {"stream_options":{"include_usage":true},\n"stream": true}',
  );
  assert.equal(withUsageAsk('{"model":"m"}'), null);
  assert.equal(
    withUsageAsk('{"stream":true,"stream_options":{"include_usage":false}}'),
    null,
  );
  assert.equal(withUsageAsk('{"stream":true,"stream_options":null}'), null);
  assert.equal(withUsageAsk("[1]"), null);
  assert.equal(withUsageAsk("not json"), null);
});

Deno.test("issue 33 which backends are asked, on which routes", () => {
  assert.equal(flavourOfKind("llama-server"), "llama-server");
  assert.equal(flavourOfKind("ollama"), "ollama");
  assert.equal(flavourOfKind("none"), null);
  assert.equal(flavourOf({ data: [{ id: "a", owned_by: "vllm" }] }), "vllm");
  assert.equal(
    flavourOf({ data: [{ id: "tiny", owned_by: "llamacpp" }] }),
    "llama-server",
  );
  assert.equal(flavourOf({ data: [{ id: "a", owned_by: "openai" }] }), null);
  assert.equal(flavourOf({ data: [] }), null);
  assert.equal(asksUsageOn("llama-server", "/v1/chat/completions"), true);
  // llama-server's completions streams carry usage unasked.
  assert.equal(asksUsageOn("llama-server", "/v1/completions"), false);
  assert.equal(asksUsageOn("vllm", "/v1/completions"), true);
  assert.equal(asksUsageOn("ollama", "/v1/chat/completions"), true);
  // Ollama puts a zeroed usage on every completions chunk once asked.
  assert.equal(asksUsageOn("ollama", "/v1/completions"), false);
  assert.equal(asksUsageOn("vllm", "/v1/messages"), false);
  assert.equal(asksUsageOn(null, "/v1/chat/completions"), false);
});
