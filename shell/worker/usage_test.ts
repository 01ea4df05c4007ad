import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import {
  indexOfUsage,
  newUsageScan,
  scanChunk,
  scanResult,
  tokenCountsFromBody,
} from "./usage.ts";

Deno.test("usage maps OpenAI counts from a JSON body", () => {
  const body = JSON.stringify({
    usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 },
  });
  assert.deepEqual(tokenCountsFromBody(body), {
    prompt_tokens: 3,
    completion_tokens: 5,
    total_tokens: 8,
  });
});

Deno.test("usage maps Anthropic input/output tokens and derives the total", () => {
  const body = JSON.stringify({ usage: { input_tokens: 4, output_tokens: 6 } });
  assert.deepEqual(tokenCountsFromBody(body), {
    prompt_tokens: 4,
    completion_tokens: 6,
    total_tokens: 10,
  });
  assert.equal(tokenCountsFromBody("{}"), null);
  assert.equal(tokenCountsFromBody('not json "usage"'), null);
});

Deno.test("usage scan finds Anthropic stream usage split across chunks", () => {
  const scan = newUsageScan();
  const start =
    'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":9,"output_tokens":1}}}\n\n';
  const delta =
    'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":12}}\n\n';
  scanChunk(scan, start.slice(0, 40));
  scanChunk(scan, start.slice(40) + delta.slice(0, 50));
  scanChunk(scan, delta.slice(50));
  assert.deepEqual(scanResult(scan), {
    prompt_tokens: 9,
    completion_tokens: 12,
    total_tokens: 21,
  });
});

Deno.test("usage scan reads the Responses API response.completed event", () => {
  const scan = newUsageScan();
  scanChunk(
    scan,
    'data: {"type":"response.completed","response":{"usage":{"input_tokens":2,"output_tokens":3,"total_tokens":5}}}\n\n',
  );
  assert.deepEqual(scanResult(scan), {
    prompt_tokens: 2,
    completion_tokens: 3,
    total_tokens: 5,
  });
  assert.equal(scanResult(newUsageScan()), null);
});

Deno.test("the usage byte search finds what Buffer.indexOf finds, at every offset and in random bytes", () => {
  const needle = Buffer.from('"usage"');
  // Every placement in a short haystack, including the very start and end.
  for (let len = 0; len <= 20; len++) {
    for (let at = 0; at + needle.length <= len; at++) {
      const hay = Buffer.alloc(len, 0x20);
      needle.copy(hay, at);
      assert.equal(indexOfUsage(hay), hay.indexOf(needle));
    }
  }
  // Random haystacks over the needle's own bytes (many near misses).
  const alphabet = Buffer.from('"usage" \n');
  let seed = 18;
  const next = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
  for (let round = 0; round < 5000; round++) {
    const hay = Buffer.alloc(next() % 64);
    for (let i = 0; i < hay.length; i++) {
      hay[i] = alphabet[next() % alphabet.length]!;
    }
    assert.equal(indexOfUsage(hay), hay.indexOf(needle));
    // Searched only up to `end`: what the bytes before it hold.
    const end = next() % (hay.length + 1);
    assert.equal(indexOfUsage(hay, end), hay.subarray(0, end).indexOf(needle));
  }
});
