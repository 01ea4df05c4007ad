// `deno task test:cluster` (issue 23): a dropped connection to a healthy Redis
// is not a lost cluster. `CLIENT KILL` of every instance's connections, over
// and over while streams run: they finish byte-exact, the workers stay
// registered, nobody declares the log lost, and new requests keep being served.
import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { answerWords } from "../../../e2e/_cluster.ts";
import { waitUntil } from "../../procs.ts";
import { everyInstanceUp, MODEL, withFleet } from "./_fleet.ts";
import { postChat } from "../../../e2e/_post_chat.ts";

const WORDS = 60;

async function stream(url: string): Promise<string> {
  const r = await postChat(url, {
    model: MODEL,
    messages: [{ role: "user", content: "hi" }],
    stream: true,
    max_tokens: WORDS,
  }, { signal: AbortSignal.timeout(30_000) });
  assert.equal(r.status, 200);
  const text = await r.text();
  assert.ok(text.trimEnd().endsWith("data: [DONE]"), text.slice(-300));
  let got = "";
  for (const m of text.matchAll(/"content":"([^"]*)"/g)) got += m[1];
  return got;
}

Deno.test("cluster: CLIENT KILL of every instance's Redis connections, again and again while streams run: the streams finish byte-exact, workers stay registered, the log is never declared lost, new requests are served", async () => {
  await withFleet({
    delayMs: 40,
    workers: [
      { name: "kill-w1", maxConcurrent: 8 },
      { name: "kill-w2", maxConcurrent: 8 },
    ],
  }, async (f) => {
    // Clients on every instance; workers on instances 0 and 1.
    const running = f.instances.flatMap((i) => [stream(i.url), stream(i.url)]);
    const admin = new Redis(f.redis.url);
    let killed = 0;
    try {
      for (let k = 0; k < 6; k++) {
        await new Promise((r) => setTimeout(r, 300));
        killed += await admin.client("KILL", "TYPE", "normal") as number;
        // A request arriving right after the cut is served too.
        if (k === 2) {
          assert.equal(await stream(f.instances[2]!.url), answerWords(WORDS));
        }
      }
    } finally {
      admin.disconnect();
    }
    for (const got of await Promise.all(running)) {
      assert.equal(got, answerWords(WORDS));
    }
    console.log(`CLIENT KILL: ${killed} connections cut over 6 rounds`);
    assert.ok(killed >= 6 * f.instances.length * 2, `killed ${killed}`);
    for (const i of f.instances) {
      const h = await (await fetch(`${i.url}/health`)).json();
      assert.equal(h.workers_connected, 2, JSON.stringify(h));
      const lost = i.child.lines.filter((l) =>
        /cluster log (down|reset)|cluster log unreachable/.test(l)
      );
      assert.deepEqual(lost, []);
    }
    for (const w of f.workers) {
      assert.ok(
        !w.lines.some((l) => l.includes("disconnected from proxy")),
        w.tail(10),
      );
    }
  });
});

Deno.test("cluster: the log loses its tail under the instances (the last entry gone as a failover to a lagging replica leaves it, then the connections cut): every instance sees the reset, gives up what it held and serves again on the log as it is", async () => {
  await withFleet({
    workers: [
      { name: "tail-w1", maxConcurrent: 4 },
      { name: "tail-w2", maxConcurrent: 4 },
    ],
  }, async (f) => {
    const admin = new Redis(f.redis.url);
    try {
      // Atomically: drop the newest entry, then cut every connection; retried
      // if an entry landed between the look and the cut.
      for (;;) {
        await admin.watch("mr:log");
        const [newest] = await admin.xrevrange("mr:log", "+", "-", "COUNT", 1);
        const done = await admin.multi().xdel("mr:log", newest![0])
          .client("KILL", "TYPE", "normal").exec();
        if (done !== null) break;
      }
    } finally {
      admin.disconnect();
    }
    const cutAt = Date.now();
    await waitUntil(
      "every instance to see the reset",
      () =>
        f.instances.every((i) =>
          i.child.lines.some((l) => l.includes("cluster log reset"))
        ),
      10_000,
    );
    await everyInstanceUp(f);
    for (const i of f.instances) {
      assert.equal(await stream(i.url), answerWords(WORDS));
    }
    console.log(
      `lost tail: every instance serving ${
        Date.now() - cutAt
      } ms after the cut`,
    );
  });
});
