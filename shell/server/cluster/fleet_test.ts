// `deno task test:cluster` (issue 16): three real server instances on one
// private Redis, behind a round-robin balancer, with the mock backend and two
// workers that connect through the balancer. Clients call instances directly,
// so which instance holds the client and which the worker is known.
import assert from "node:assert/strict";
import OpenAI from "openai";
import { waitUntil } from "../../demo/children.ts";
import { MODEL, withFleet } from "./_fleet.ts";

const WORKERS = [
  { name: "fleet-w1", maxConcurrent: 4 },
  { name: "fleet-w2", maxConcurrent: 4 },
];

function openai(url: string): OpenAI {
  return new OpenAI({
    baseURL: `${url}/v1`,
    apiKey: "unused",
    maxRetries: 0,
    timeout: 20_000,
  });
}

Deno.test("cluster: a stream received on one instance and served by a worker on another arrives byte-exact, and a client abort reaches the backend within 1 s", async () => {
  await withFleet({ workers: WORKERS }, async (f) => {
    // Workers went to instances 0 and 1 (round-robin); instance 2 holds none.
    const a = f.instances[2]!;
    assert.notEqual(f.instanceOfWorker(0), a);
    assert.notEqual(f.instanceOfWorker(1), a);
    const body = JSON.stringify({
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      max_tokens: 12,
    });
    // The same request straight to the backend: what the relay must pass on.
    const direct = await (await fetch(`${f.mockUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    })).text();
    const relayed = await (await fetch(`${a.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    })).text();
    // Ids and timestamps differ per call; everything else must match byte for byte.
    const norm = (s: string) =>
      s.replace(/"id":"[^"]*"/g, '"id":""').replace(
        /"created":\d+/g,
        '"created":0',
      );
    assert.equal(norm(relayed), norm(direct));

    // The official SDK over the cross-instance path.
    let text = "";
    const stream = await openai(a.url).chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      max_tokens: 8,
    });
    for await (const c of stream) text += c.choices[0]?.delta.content ?? "";
    assert.equal(text, "The quick brown fox jumps over the lazy ");

    // Abort after the second chunk: the backend behind another instance sees it.
    const before = await f.stats();
    const long = await openai(a.url).chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      max_tokens: 200,
    });
    let seen = 0;
    for await (const _ of long) if (++seen === 2) break;
    const abortedAt = Date.now();
    await waitUntil("the backend to see the abort", async () => {
      const s = await f.stats();
      return s.aborted > before.aborted && s.openStreams === 0;
    }, 1_000);
    assert.ok(Date.now() - abortedAt <= 1_000);
  });
});
