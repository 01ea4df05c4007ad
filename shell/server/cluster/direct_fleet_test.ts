// `deno task test:cluster`, issue 23: control through the log, data direct.
// Real processes (redis-server, three instances behind the balancer, the mock
// backend, two workers): answer bytes never go through Redis, and a stream
// whose two ends are alive keeps flowing while Redis is paused.
import assert from "node:assert/strict";
import { MODEL, withFleet } from "./_fleet.ts";
import { redisCli } from "./_redis.ts";

const WORKERS = [
  { name: "direct-w1", maxConcurrent: 4 },
  { name: "direct-w2", maxConcurrent: 4 },
];

/** Redis commands served so far, all kinds (INFO commandstats), less our own INFO calls. */
async function commandsServed(url: string): Promise<number> {
  const info = await redisCli(url, "INFO", "commandstats");
  let total = 0;
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (m[1] !== "info") total += Number(m[2]);
  }
  return total;
}

function streamBody(words: number, delayMs: number): string {
  return JSON.stringify({
    model: MODEL,
    messages: [{ role: "user", content: "hi" }],
    stream: true,
    max_tokens: words,
    mock_delay_ms: delayMs,
  });
}

/** Ids and timestamps differ per call; everything else must match byte for byte. */
const norm = (s: string) =>
  s.replace(/"id":"[^"]*"/g, '"id":""').replace(
    /"created":\d+/g,
    '"created":0',
  );

async function straight(mockUrl: string, body: string): Promise<string> {
  return await (await fetch(`${mockUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
  })).text();
}

/** Reads a streamed answer to its end, calling `onRead` with the text so far after each read. */
async function readStream(
  res: Response,
  onRead: (text: string) => void,
): Promise<string> {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return text;
    text += value;
    onRead(text);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

Deno.test("cluster data path: no answer byte goes through Redis: a 10,000-chunk stream across instances costs 0 Redis commands per chunk and a small constant per request; Redis paused 5 s mid-stream (client and worker on two instances) or stopped 8 s (both on one), the stream completes byte-exact", async () => {
  await withFleet({ workers: WORKERS }, async (f) => {
    // Workers went to instances 0 and 1 (round-robin); instance 2 holds none.
    const client = f.instances[2]!;
    const chat = (url: string, body: string) =>
      fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });

    // -- Redis commands per chunk and per request ------------------------------
    const chunks = 10_000;
    const big = streamBody(chunks, 0);
    // The fleet's own background (ticks, reads) measured over an idle stretch.
    const idleFrom = await commandsServed(f.redis.url);
    const idleStart = performance.now();
    await sleep(3_000);
    const idleRate = (await commandsServed(f.redis.url) - idleFrom) /
      (performance.now() - idleStart);
    const before = await commandsServed(f.redis.url);
    const started = performance.now();
    const relayed = await (await chat(client.url, big)).text();
    const tookMs = performance.now() - started;
    const during = await commandsServed(f.redis.url) - before;
    const events = relayed.split("\n\n").filter((e) => e.startsWith("data:"));
    assert.ok(events.length >= chunks, `${events.length} events`);
    assert.equal(norm(relayed), norm(await straight(f.mockUrl, big)));
    const background = idleRate * tookMs;
    // Per request: 20 small streams one after another, less the background.
    const smallBefore = await commandsServed(f.redis.url);
    const smallStart = performance.now();
    for (let i = 0; i < 20; i++) {
      await (await chat(client.url, streamBody(5, 0))).text();
    }
    const smallDuring = await commandsServed(f.redis.url) - smallBefore;
    const perRequest = Math.max(
      0,
      smallDuring - idleRate * (performance.now() - smallStart),
    ) / 20;
    // What the big stream cost beyond the background and its one request's share.
    const perChunk = Math.max(0, during - background - perRequest) / chunks;
    console.log(
      `Redis commands: ${during} during a ${chunks}-chunk stream of ${
        Math.round(tookMs)
      } ms (background ${Math.round(background)}): ${
        perChunk.toFixed(4)
      } per chunk; ${
        perRequest.toFixed(1)
      } per request (20 five-chunk streams)`,
    );
    // Chunks through the log would cost one append per chunk (or per event-loop
    // turn) and a read on every instance: thousands here.
    assert.ok(perChunk < 0.01, `${perChunk} Redis commands per chunk`);
    assert.ok(perRequest < 40, `${perRequest} Redis commands per request`);
    // A non-streaming answer's body goes direct too.
    const whole = await (await chat(
      client.url,
      JSON.stringify({
        model: MODEL,
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 40,
      }),
    )).json();
    assert.match(whole.choices[0].message.content, /jumps over/);
    // And no answer byte sits in the log: its entries carry control only.
    const log = await redisCli(f.redis.url, "XRANGE", "mr:log", "-", "+");
    assert.doesNotMatch(log, /jumps over/);

    // -- Redis paused 5 s mid-stream, client and worker on two instances -------
    const paced = streamBody(400, 30);
    const expected = norm(await straight(f.mockUrl, paced));
    const res = await chat(client.url, paced);
    assert.equal(res.status, 200);
    let seen = 0;
    let atPause = -1;
    let atResume = -1;
    let resumed: Promise<void> = Promise.resolve();
    const text = await readStream(res, (t) => {
      seen = t.length;
      if (atPause === -1 && seen > 2_000) {
        f.redis.child.kill("SIGSTOP");
        atPause = seen;
        resumed = sleep(5_000).then(() => {
          atResume = seen;
          f.redis.child.kill("SIGCONT");
        });
      }
    });
    await resumed;
    assert.ok(atPause > 0, "Redis was paused mid-stream");
    assert.ok(
      atResume > atPause,
      "the stream kept flowing while Redis was paused",
    );
    assert.ok(
      atResume < text.length,
      "Redis came back before the stream ended",
    );
    if (norm(text) !== expected) {
      console.log(`ended with: ${text.slice(-300)}`);
      for (const i of f.instances) {
        console.log(`--- ${i.url}\n${i.child.lines.slice(-25).join("\n")}`);
      }
    }
    assert.equal(norm(text), expected);
    console.log(
      `paused 5 s mid-stream: ${
        atResume - atPause
      } bytes flowed during the pause; byte-exact`,
    );

    // -- Redis stopped 8 s while a stream runs on the worker's own instance -----
    await waitServing(client.url);
    const home = f.instanceOfWorker(0);
    const local = await chat(home.url, paced);
    assert.equal(local.status, 200);
    let stopped = false;
    let continued: Promise<void> = Promise.resolve();
    const localText = await readStream(local, (t) => {
      if (!stopped && t.length > 1_000) {
        stopped = true;
        f.redis.child.kill("SIGSTOP");
        continued = sleep(8_000).then(() => {
          f.redis.child.kill("SIGCONT");
        });
      }
    });
    await continued;
    assert.ok(stopped);
    if (norm(localText) !== expected) {
      console.log(`ended with: ${localText.slice(-400)}`);
      console.log(home.child.lines.slice(-40).join("\n"));
    }
    assert.equal(norm(localText), expected);
    await waitServing(home.url);
  });
});

/** Waits until `url` admits requests again after an outage. */
async function waitServing(url: string): Promise<void> {
  const until = performance.now() + 20_000;
  while (performance.now() < until) {
    const h = await fetch(`${url}/health`);
    await h.body?.cancel();
    if (h.status === 200) return;
    await sleep(200);
  }
  throw new Error(`${url} did not serve again within 20 s`);
}

Deno.test("cluster data path: limits on the direct path fire as on one server: a stream idle past REQUEST_TIMEOUT_SECS (kept by the client's instance) and a stream over MAX_STREAM_BYTES (counted by the worker's instance) end with an SSE error, the worker's backend sees the cancel", async () => {
  await withFleet({
    workers: WORKERS,
    env: { REQUEST_TIMEOUT_SECS: "2", MAX_STREAM_BYTES: "4000" },
  }, async (f) => {
    const client = f.instances[2]!;
    const chat = (body: string) =>
      fetch(`${client.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
    // Idle: a word every 6 s, so the stream falls silent after its first event.
    const before = await f.stats();
    const started = performance.now();
    const idle = await (await chat(streamBody(3, 6_000))).text();
    const took = performance.now() - started;
    assert.match(idle, /request_timeout/);
    assert.doesNotMatch(idle, /\[DONE\]/);
    assert.ok(took < 5_500, `the idle stream ended after ${took} ms`);
    // Too large: 400 words of about 150 bytes each.
    const big = await (await chat(streamBody(400, 10))).text();
    assert.match(big, /stream_too_large/);
    assert.doesNotMatch(big, /\[DONE\]/);
    assert.ok(big.length < 8_000, `${big.length} bytes reached the client`);
    await waitFor(async () => {
      const s = await f.stats();
      return s.aborted >= before.aborted + 2 && s.openStreams === 0;
    });
  });
});

async function waitFor(ok: () => Promise<boolean>): Promise<void> {
  const until = performance.now() + 10_000;
  while (!(await ok())) {
    if (performance.now() > until) throw new Error("timed out");
    await sleep(100);
  }
}
