// `deno task test:cluster` (issue 16): three real server instances on one
// private Redis, behind a round-robin balancer, with the mock backend and two
// workers that connect through the balancer. Clients call instances directly,
// so which instance holds the client and which the worker is known.
import assert from "node:assert/strict";
import OpenAI from "openai";
import { waitUntil } from "../../procs.ts";
import { startServerProcess } from "../../demo/cluster.ts";
import { answerWords } from "../../../e2e/_cluster.ts";
import { encodeOpToken } from "../ops/op_token.ts";
import { type Fleet, type Instance, MODEL, withFleet } from "./_fleet.ts";
import { redisCli } from "./_redis.ts";
import { postChat } from "../../../e2e/_post_chat.ts";
import { openaiAt } from "../../../e2e/_sdk.ts";

const WORKERS = [
  { name: "fleet-w1", maxConcurrent: 4 },
  { name: "fleet-w2", maxConcurrent: 4 },
];

Deno.test("cluster: a stream received on one instance and served by a worker on another arrives byte-exact, cache affinity holds across instances, and a client abort reaches the backend within 1 s", async () => {
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
    const stream = await openaiAt(a.url).chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      max_tokens: 8,
    });
    for await (const c of stream) text += c.choices[0]?.delta.content ?? "";
    assert.equal(text, "The quick brown fox jumps over the lazy ");

    // Cache affinity is fleet-wide: one cache tag, four instances' worth of
    // calls, one worker.
    const forwarded = () =>
      f.workers.map((w) =>
        w.lines.filter((l) => l.includes("forwarding request")).length
      );
    const before0 = forwarded();
    for (const i of [0, 1, 2, 0]) {
      const r = await chat(f.instances[i]!.url, { "x-cache-tag": "conv-1" });
      assert.equal(r.status, 200);
      await r.body?.cancel();
    }
    const served = forwarded().map((n, k) => n - before0[k]!);
    assert.deepEqual([...served].sort(), [0, 4], `per worker: ${served}`);

    // Abort after the second chunk: the backend behind another instance sees it.
    const before = await f.stats();
    const long = await openaiAt(a.url).chat.completions.create({
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

/** The worker (index) whose log shows it forwarding request number `nth` (1-based). */
async function forwardingWorker(
  f: { workers: { lines: string[] }[] },
  nth = 1,
): Promise<number> {
  let found = -1;
  await waitUntil("a worker to forward the request", () => {
    let count = 0;
    f.workers.forEach((w, i) => {
      const n = w.lines.filter((l) => l.includes("forwarding request")).length;
      count += n;
      if (n > 0 && found === -1 && count >= nth) found = i;
    });
    return found !== -1;
  }, 10_000);
  return found;
}

/**
 * A 40-word chat asked of the third instance (which holds no worker), not
 * yet answered, and the instance holding the worker that forwards it.
 */
async function askedOfThird(f: Fleet): Promise<{
  client: Instance;
  answer: Promise<OpenAI.ChatCompletion>;
  holder: Instance;
}> {
  const client = f.instances[2]!;
  const answer = openaiAt(client.url).chat.completions.create({
    model: MODEL,
    messages: [{ role: "user", content: "hi" }],
    max_tokens: 40,
  });
  const holder = f.instanceOfWorker(await forwardingWorker(f));
  return { client, answer, holder };
}

async function everyInstanceSees(
  urls: string[],
  workers: number,
  timeoutMs: number,
): Promise<void> {
  await waitUntil(
    `${workers} workers registered on every live instance`,
    async () => {
      for (const url of urls) {
        const h = await (await fetch(`${url}/health`)).json();
        if (h.workers_connected !== workers) return false;
      }
      return true;
    },
    timeoutMs,
  );
}

Deno.test("cluster: kill -9 of the worker's instance before the first byte: the request is requeued and completes; workers re-register on survivors", async () => {
  await withFleet({ workers: WORKERS }, async (f) => {
    const { client, answer, holder: victim } = await askedOfThird(f);
    assert.notEqual(victim, client);
    victim.child.kill("SIGKILL");
    const r = await answer;
    assert.equal(r.choices[0]?.message.content, answerWords(40));
    // The backend saw both attempts: the orphaned one and the requeued one.
    assert.equal((await f.stats()).requests, 2);
    const survivors = f.instances.filter((i) => i !== victim).map((i) => i.url);
    await everyInstanceSees(survivors, 2, 10_000);
  });
});

Deno.test("cluster: kill -9 of the worker's instance after the first byte: the stream ends with an SSE error, never [DONE]", async () => {
  await withFleet({ workers: WORKERS }, async (f) => {
    const client = f.instances[2]!;
    const res = await streamChat(client.url, 400);
    assert.equal(res.status, 200);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = (await reader.read()).value ?? "";
    const victim = f.instanceOfWorker(await forwardingWorker(f));
    victim.child.kill("SIGKILL");
    const killedAt = Date.now();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
    assert.ok(Date.now() - killedAt < 8_000, "the stream ended in time");
    assert.match(text, /error/);
    assert.doesNotMatch(text, /\[DONE\]/);
  });
});

Deno.test("cluster: kill -9 of the client's instance: the backend behind another instance sees the abort within 6 s", async () => {
  await withFleet({ workers: WORKERS }, async (f) => {
    const client = f.instances[2]!;
    const res = await streamChat(client.url, 1000);
    const reader = res.body!.getReader();
    await reader.read();
    const before = await f.stats();
    assert.equal(before.openStreams, 1);
    client.child.kill("SIGKILL");
    const killedAt = Date.now();
    reader.read().catch(() => {});
    await waitUntil("the backend to see the abort", async () => {
      const s = await f.stats();
      return s.aborted > before.aborted && s.openStreams === 0;
    }, 6_000);
    assert.ok(Date.now() - killedAt <= 6_000);
    await reader.cancel().catch(() => {});
  });
});

const ADMIN = "fleet-admin-token";

function chat(
  url: string,
  headers: Record<string, string> = {},
  maxTokens = 1,
  stream = false,
): Promise<Response> {
  return postChat(url, {
    model: MODEL,
    messages: [{ role: "user", content: "hi" }],
    ...(stream ? { stream: true } : {}),
    max_tokens: maxTokens,
  }, { headers });
}

/** A streamed chat of `maxTokens` words through `url`. */
function streamChat(url: string, maxTokens: number): Promise<Response> {
  return chat(url, {}, maxTokens, true);
}

const OP_KEY = new TextEncoder().encode("fleet-op-token-key-0123456789");

Deno.test("cluster: fleet-wide rate limit, tenant fairness, API keys and op-token nonces: 10 req/min admits exactly 10 of 30 spread over 3 instances; a flood on one instance does not starve another tenant on another; max_concurrent and the queue bound hold fleet-wide; a key created on one works on all, revoked on one is refused on all within 1 s; a nonce used on one is refused (409) on another", async () => {
  const keyPath = await Deno.makeTempFile({ suffix: ".key" });
  await Deno.writeFile(keyPath, OP_KEY);
  await withFleet({
    workers: WORKERS,
    env: {
      DEFAULT_RATE_LIMIT: "10req/min",
      TENANT_RATE_LIMIT_flood: "1000req/min",
      MAX_QUEUE_LEN: "30",
      MODELRELAY_ADMIN_TOKEN: ADMIN,
      MODELRELAY_REQUIRE_API_KEYS: "true",
      VERIFIED_OP_TOKEN_KEY_PATH: keyPath,
      OP_TOKEN_SIGNERS: "admin1,admin2,admin3",
      OP_TOKEN_MIN_SIGNERS: "2",
    },
  }, async (f) => {
    const [i0, i1, i2] = f.instances as [
      typeof f.instances[0],
      typeof f.instances[0],
      typeof f.instances[0],
    ];
    const created = await (await fetch(`${i0.url}/admin/keys`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${ADMIN}`,
        "content-type": "application/json",
      },
      // Names its tenant per request: a gateway's key (issue 24).
      body: JSON.stringify({ name: "fleet", may_name_tenants: true }),
    })).json() as { id: string; key: string };
    const auth = { authorization: `Bearer ${created.key}` };
    // Valid everywhere within a log hop.
    await waitUntil("the new key to work on another instance", async () => {
      const r = await chat(i2.url, { ...auth, "x-tenant-id": "keys" });
      await r.body?.cancel();
      return r.status === 200;
    }, 1_000);
    assert.equal((await chat(i1.url, { "x-tenant-id": "keys" })).status, 401);

    // 30 requests of one tenant, 10 per instance, all at once.
    const statuses = await Promise.all(
      Array.from({ length: 30 }, async (_, n) => {
        const r = await chat(f.instances[n % 3]!.url, {
          ...auth,
          "x-tenant-id": "burst",
        });
        await r.body?.cancel();
        return r.status;
      }),
    );
    assert.equal(statuses.filter((s) => s === 200).length, 10);
    assert.equal(statuses.filter((s) => s === 429).length, 20);

    // Tenant fairness is fleet-wide: while tenant "flood" fills the shared
    // queue through i0, one request of tenant "fair" on i2 takes the next free
    // slot instead of waiting behind the flood (8 slots, 36 flood requests).
    let floodDone = 0;
    const flood = Array.from({ length: 36 }, async () => {
      const r = await chat(i0.url, { ...auth, "x-tenant-id": "flood" }, 10);
      await r.body?.cancel();
      floodDone++;
      return r.status;
    });
    await waitUntil("the flood to queue up", async () => {
      const h = await (await fetch(`${i2.url}/health`)).json();
      return h.queue_depth >= 20;
    }, 5_000);
    const fair = await chat(i2.url, { ...auth, "x-tenant-id": "fair" });
    await fair.body?.cancel();
    assert.equal(fair.status, 200);
    assert.ok(
      36 - floodDone >= 15,
      `tenant "fair" waited behind ${floodDone} flood requests`,
    );
    assert.deepEqual(new Set(await Promise.all(flood)), new Set([200]));

    // max_concurrent and the queue bound are fleet-wide: 45 requests spread over
    // three instances meet 2 workers x 4 slots and one queue of 30, so exactly
    // 7 are refused (per-instance bounds would refuse none).
    const burst = await Promise.all(
      Array.from({ length: 45 }, async (_, n) => {
        const r = await chat(f.instances[n % 3]!.url, {
          ...auth,
          "x-tenant-id": "flood",
        }, 20);
        const text = await r.text();
        return r.status === 503 && text.includes("queue_full") ? 503 : r.status;
      }),
    );
    assert.equal(burst.filter((s) => s === 503).length, 7);
    assert.equal(burst.filter((s) => s === 200).length, 38);

    // Revoked on i1: refused on every instance within 1 s.
    const del = await fetch(`${i1.url}/admin/keys/${created.id}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    assert.equal(del.status, 204);
    const revokedAt = Date.now();
    await waitUntil("the revoked key to be refused everywhere", async () => {
      for (const i of [i0, i2]) {
        const r = await chat(i.url, { ...auth, "x-tenant-id": "keys" });
        await r.body?.cancel();
        if (r.status !== 401) return false;
      }
      return true;
    }, 1_000);
    assert.ok(Date.now() - revokedAt <= 1_000);

    // One op token, two instances: the second use is a replay.
    const token = encodeOpToken({
      operation: "model-load",
      modelId: MODEL,
      issuedAt: Math.floor(Date.now() / 1000),
      signers: ["admin1", "admin2"],
      nonce: `fleet-${crypto.randomUUID()}`,
    }, OP_KEY);
    const load = async (url: string) => {
      const r = await fetch(`${url}/v1/models/load`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ modelId: MODEL, verifiedOpToken: token }),
      });
      return { status: r.status, body: await r.text() };
    };
    const first = await load(i0.url);
    // Accepted: the task is read from the replicated state after its log hop.
    assert.equal(first.status, 202, first.body);
    const replay = await load(i2.url);
    assert.equal(replay.status, 409, replay.body);
    assert.match(replay.body, /op_token_replayed/);
  });
  await Deno.remove(keyPath);
});

Deno.test("cluster: a new instance joins a running cluster from the snapshot and the log's tail; one with other core settings refuses to join", async () => {
  await withFleet({ workers: WORKERS }, async (f) => {
    // Traffic first, then wait for the lowest instance's snapshot.
    assert.equal((await chat(f.instances[0]!.url)).status, 200);
    await waitUntil(
      "a snapshot in Redis",
      async () => (await redisCli(f.redis.url, "EXISTS", "mr:snap")) === "1",
      10_000,
    );
    const late = await f.addInstance();
    await everyInstanceSees([late.url], 2, 5_000);
    const r = await chat(late.url);
    assert.equal(r.status, 200, await r.text());
    await assert.rejects(
      startServerProcess({
        secret: "fleet-secret",
        env: { CLUSTER_URL: f.redis.url, MAX_QUEUE_LEN: "7" },
      }),
      /cannot join the cluster/,
    );
  });
});

Deno.test("cluster: a frozen instance (SIGSTOP) is declared gone, its request requeued; thawed, it rejoins under a new id and serves again", async () => {
  await withFleet({ workers: WORKERS }, async (f) => {
    const { answer, holder: frozen } = await askedOfThird(f);
    frozen.child.kill("SIGSTOP");
    const r = await answer;
    assert.equal(r.choices[0]?.message.content, answerWords(40));
    frozen.child.kill("SIGCONT");
    // It learns it is out either from the log (declared gone: it goes on
    // under a new id) or from its own Redis commands, whose timeouts expired
    // while it was stopped (it rejoins); both end what it held.
    await frozen.child.waitForLine(
      /declared gone by the cluster; rejoining|cluster log unreachable/,
    );
    // Issue 23: an instance that held through its own outage and finds itself
    // declared gone takes a new id without a second join.
    await waitUntil(
      "the thawed instance to rejoin",
      () =>
        frozen.child.lines.filter((l) => l.includes("joined the relay cluster"))
            .length >= 2 ||
        frozen.child.lines.some((l) => l.includes("declared gone")),
      10_000,
    );
    await everyInstanceSees(f.instances.map((i) => i.url), 2, 10_000);
    const again = await chat(frozen.url);
    assert.equal(again.status, 200, await again.text());
  });
});

Deno.test("cluster: SIGTERM of one instance drains only it: its stream finishes, new requests there get 503, its workers move to the others, it exits 0, the fleet keeps serving", async () => {
  await withFleet({ workers: WORKERS }, async (f) => {
    const leaving = f.instanceOfWorker(0);
    // A stream in flight through the leaving instance finishes.
    const res = await streamChat(leaving.url, 40);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = (await reader.read()).value ?? "";
    leaving.child.kill("SIGTERM");
    await leaving.child.waitForLine(/graceful shutdown/);
    const refused = await chat(leaving.url);
    assert.equal(refused.status, 503);
    // The core's own refusal, as a single server's shutdown (issue 23).
    assert.match(await refused.text(), /shutting_down/);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
    assert.match(text, /\[DONE\]/);
    assert.equal((await leaving.child.status).code, 0);
    const rest = f.instances.filter((i) => i !== leaving);
    await everyInstanceSees(rest.map((i) => i.url), 2, 10_000);
    for (const i of rest) {
      const r = await chat(i.url);
      assert.equal(r.status, 200, await r.text());
    }
  });
});
