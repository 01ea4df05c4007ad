// `deno task test:cluster`, issue 23 defect 1: a Redis outage must not take the
// workers offline for good. Real processes: redis-server, three instances
// behind the balancer, three workers that connect through it.
import assert from "node:assert/strict";
import { waitUntil } from "../../procs.ts";
import { type Fleet, MODEL, withFleet } from "./_fleet.ts";
import { postChat } from "../../../e2e/_post_chat.ts";

const WORKERS = [
  { name: "outage-w1", maxConcurrent: 2 },
  { name: "outage-w2", maxConcurrent: 2 },
  { name: "outage-w3", maxConcurrent: 2 },
];

/** What the issue promises after Redis answers again. */
const RECOVERY_MS = 10_000;

function chat(url: string): Promise<Response> {
  return postChat(url, {
    model: MODEL,
    messages: [{ role: "user", content: "hi" }],
    max_tokens: 1,
  });
}

/** Every instance refuses new requests: 503 cluster_unavailable with Retry-After. */
async function everyInstanceRefuses(f: Fleet): Promise<void> {
  await waitUntil(
    "every instance to answer 503 cluster_unavailable",
    async () => {
      for (const i of f.instances) {
        const r = await chat(i.url);
        const body = await r.text();
        if (
          r.status !== 503 || !body.includes("cluster_unavailable") ||
          r.headers.get("retry-after") === null
        ) return false;
      }
      return true;
    },
    8_000,
  );
}

/**
 * Ms from `since` until every instance is up, sees every worker registered
 * again, and serves a request.
 */
async function recoveredAfter(f: Fleet, since: number): Promise<number> {
  await waitUntil(
    "every worker registered again, seen by every instance",
    async () => {
      for (const i of f.instances) {
        const h = await (await fetch(`${i.url}/health`)).json();
        if (h.cluster?.up !== true || h.workers_connected !== WORKERS.length) {
          return false;
        }
      }
      return true;
    },
    RECOVERY_MS + 20_000,
  );
  for (const i of f.instances) {
    const r = await chat(i.url);
    assert.equal(r.status, 200, await r.text());
  }
  const done = Date.now() - since;
  for (const i of f.instances) {
    const h = await (await fetch(`${i.url}/health`)).json();
    assert.equal(h.cluster.instances, f.instances.length, JSON.stringify(h));
  }
  return done;
}

Deno.test("cluster, issue 23: Redis paused 8 s, then killed and restarted empty: new requests meanwhile get 503 cluster_unavailable with Retry-After; each time every worker is registered again and every instance serves within 10 s of Redis answering", async () => {
  await withFleet({ workers: WORKERS }, async (f) => {
    // Paused: no connection closes, commands time out.
    f.redis.child.kill("SIGSTOP");
    const pausedAt = Date.now();
    await everyInstanceRefuses(f);
    // The workers' reconnects meet instances cut off from the log meanwhile.
    await new Promise((r) => setTimeout(r, 8_000 - (Date.now() - pausedAt)));
    f.redis.child.kill("SIGCONT");
    const paused = await recoveredAfter(f, Date.now());
    console.log(
      `Redis paused 8 s: fleet serving again ${paused} ms after SIGCONT`,
    );
    assert.ok(paused <= RECOVERY_MS, `recovered after ${paused} ms`);

    // Killed, then restarted empty: the cluster starts over on a new log.
    f.redis.child.kill("SIGKILL");
    await f.redis.child.status;
    await everyInstanceRefuses(f);
    await f.redis.restart();
    const restarted = await recoveredAfter(f, Date.now());
    console.log(
      `Redis restarted empty: fleet serving again ${restarted} ms after it answered`,
    );
    assert.ok(restarted <= RECOVERY_MS, `recovered after ${restarted} ms`);
  });
});
