// The Redis engine against a real redis-server (issue 23): a dropped
// connection is reconnected and retried, silence beyond the timeout loses the
// log, a Redis that came back empty is a reset, and a Redis that would evict
// the log is refused at start.
import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { waitUntil } from "../../procs.ts";
import type { LogFields, LogLevel } from "../../log.ts";
import type { ClusterEngine, EngineLoss, EngineStatus } from "./engine.ts";
import { connectRedis } from "./redis_engine.ts";
import { type RedisProcess, startRedis } from "./_redis.ts";
import { DEFAULT_CONFIG } from "../../../core/config.ts";
import {
  applyRecord,
  decodeRecord,
  encodeRecord,
  initialClusterState,
} from "../../../core/cluster/mod.ts";
import { startServerProcess } from "../../demo/cluster.ts";

type Line = { level: LogLevel; message: string; fields: LogFields };

function recorder(): { lines: Line[]; log: (...a: unknown[]) => void } {
  const lines: Line[] = [];
  return {
    lines,
    log: (level, message, fields) =>
      lines.push({
        level: level as LogLevel,
        message: message as string,
        fields: (fields ?? {}) as LogFields,
      }),
  };
}

async function admin<T>(url: string, f: (r: Redis) => Promise<T>): Promise<T> {
  const r = new Redis(url);
  try {
    return await f(r);
  } finally {
    r.disconnect();
  }
}

/** A redis-server and an engine on it, both closed after `fn` whatever it throws. */
async function withEngine(
  logTimeoutMs: number,
  fn: (engine: ClusterEngine, redis: RedisProcess) => Promise<void>,
): Promise<void> {
  const redis = await startRedis();
  const engine = await connectRedis(redis.url, { logTimeoutMs });
  try {
    await fn(engine, redis);
  } finally {
    await engine.close();
    await redis.stop();
  }
}

/** The kinds of loss `engine` reports from now on, in order. */
function lossesOf(engine: ClusterEngine): EngineLoss["kind"][] {
  const losses: EngineLoss["kind"][] = [];
  engine.onStatus((_, loss) => {
    if (loss !== null) losses.push(loss.kind);
  });
  return losses;
}

Deno.test("redis engine: CLIENT KILL of its connections mid-traffic: every append lands, in order, the blocked read returns them, the log never reports down, and the replicas apply each record once", async () => {
  const redis = await startRedis();
  const engine = await connectRedis(redis.url, { logTimeoutMs: 3_000 });
  const killer = new Redis(redis.url);
  try {
    const statuses: EngineStatus[] = [];
    engine.onStatus((s) => statuses.push(s));
    const reading = engine.read("0", 1_000, 1000);
    const appends: Promise<void>[] = [];
    const kills: Promise<unknown>[] = [];
    const N = 600;
    for (let i = 0; i < N; i++) {
      appends.push(engine.append(encodeRecord({
        kind: "note",
        instance: "i-test",
        seq: i + 1,
        appliedMs: null,
        note: { n: i },
      })));
      // Cut while appends are on the wire: their answers are lost, they are resent.
      if (i % 100 === 60) kills.push(killer.client("KILL", "TYPE", "normal"));
      if (i % 25 === 0) await new Promise((r) => setTimeout(r, 3));
    }
    await Promise.all([...appends, ...kills]);
    const first = await reading;
    assert.ok(first.length > 0, "the read blocked across the kills returned");
    // Resent batches may land twice; applied, each record counts once, in order.
    const all = await engine.read("0", 0, 10_000);
    const cs = initialClusterState(DEFAULT_CONFIG);
    const applied: unknown[] = [];
    for (const e of all) {
      const note = applyRecord(cs, decodeRecord(e.data), e.ms).note;
      if (note !== null) applied.push(note.n);
    }
    assert.deepEqual(applied, Array.from({ length: N }, (_, i) => i));
    console.log(
      `CLIENT KILL x6 under ${N} appends: ${all.length} entries in the log, ${
        all.length - N
      } resent copies, each record applied once`,
    );
    assert.deepEqual(statuses, []);
  } finally {
    killer.disconnect();
    await engine.close();
    await redis.stop();
  }
});

Deno.test("redis engine: Redis silent longer than CLUSTER_LOG_TIMEOUT_MS (SIGSTOP) is down, the pending append rejected; answering again is up", async () => {
  await withEngine(800, async (engine, redis) => {
    try {
      const statuses: EngineStatus[] = [];
      engine.onStatus((s) => statuses.push(s));
      await engine.append("before");
      Deno.kill(redis.child.pid, "SIGSTOP");
      const stoppedAt = Date.now();
      await assert.rejects(engine.append("during"));
      const took = Date.now() - stoppedAt;
      assert.ok(took >= 700 && took < 5_000, `rejected after ${took} ms`);
      assert.deepEqual(statuses, ["down"]);
      Deno.kill(redis.child.pid, "SIGCONT");
      await waitUntil(
        "the engine to be up again",
        () => statuses.at(-1) === "up",
        10_000,
      );
      await engine.append("after");
    } finally {
      Deno.kill(redis.child.pid, "SIGCONT");
    }
  });
});

Deno.test("redis engine: a Redis restarted empty within the timeout is reported as a reset (another log), not taken for the same one", async () => {
  await withEngine(5_000, async (engine, redis) => {
    const statuses: EngineStatus[] = [];
    const losses: EngineLoss["kind"][] = [];
    engine.onStatus((s, loss) => {
      statuses.push(s);
      if (loss !== null) losses.push(loss.kind);
    });
    await engine.epoch();
    await engine.append("a");
    await engine.read("0", 0, 10);
    await redis.restart();
    await waitUntil(
      "the engine to report a reset",
      () => losses.includes("reset"),
      10_000,
    );
    assert.deepEqual(losses, ["reset"]);
    assert.deepEqual(statuses, ["down", "up"]);
    // The engine is usable at once: the runtime rejoins on the new log.
    await engine.append("b");
  });
});

Deno.test("redis engine: a Redis that may evict the log (allkeys-lru) is refused at start, saying so; one without persistence is a warning", async () => {
  const evicting = await startRedis({
    args: ["--maxmemory-policy", "allkeys-lru"],
  });
  try {
    const rec = recorder();
    await assert.rejects(
      connectRedis(evicting.url, { log: rec.log }),
      (e: Error) =>
        e.name === "ClusterJoinError" &&
        /maxmemory-policy is allkeys-lru.*noeviction/.test(e.message),
    );
  } finally {
    await evicting.stop();
  }
  const volatile = await startRedis({
    args: ["--maxmemory-policy", "volatile-lru"],
  });
  try {
    const rec = recorder();
    const engine = await connectRedis(volatile.url, { log: rec.log });
    await engine.close();
    const warned = rec.lines.filter((l) => l.level === "warn");
    assert.equal(warned.length, 1, JSON.stringify(rec.lines));
    assert.match(warned[0]!.message, /keeps nothing on disk.*appendonly yes/);
  } finally {
    await volatile.stop();
  }
  const dir = await Deno.makeTempDir({ prefix: "relay-redis-" });
  const persistent = await startRedis({
    args: ["--dir", dir, "--save", "3600 1"],
  });
  try {
    const rec = recorder();
    const engine = await connectRedis(persistent.url, { log: rec.log });
    await engine.close();
    assert.deepEqual(rec.lines, []);
  } finally {
    await persistent.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("redis engine: a reconnect that finds the entry it read last gone (a lost tail) is reported as a reset", async () => {
  await withEngine(5_000, async (engine, redis) => {
    const losses = lossesOf(engine);
    await engine.epoch();
    for (const d of ["a", "b", "c"]) await engine.append(d);
    const read = await engine.read("0", 0, 10);
    assert.equal(read.length, 3);
    // What a failover to a lagging replica does: the tail is gone, the epoch kept.
    await admin(redis.url, async (r) => {
      await r.xdel("mr:log", read[2]!.id);
      await r.client("KILL", "TYPE", "normal");
    });
    await waitUntil(
      "the engine to report a reset",
      () => losses.includes("reset"),
      10_000,
    );
    // Reading on from the lost entry would skip the hole: refused.
    await assert.rejects(engine.read(read[2]!.id, 0, 10), /lost its tail/);
    assert.equal((await engine.read(read[1]!.id, 0, 10)).length, 0);
  });
});

Deno.test("redis engine: holds(id) tells whether the log still has an entry, and asking it leaves the tail check alone (a resume check once read back a made-up id, which the tail check then took for this instance's position and reported as a lost tail)", async () => {
  await withEngine(5_000, async (engine, redis) => {
    const losses = lossesOf(engine);
    await engine.epoch();
    for (const d of ["a", "b"]) await engine.append(d);
    const read = await engine.read("0", 0, 10);
    assert.equal(await engine.holds(read[1]!.id), true);
    assert.equal(await engine.holds("1-0"), false);
    await admin(redis.url, (r) => r.client("KILL", "TYPE", "normal"));
    await engine.append("c");
    assert.equal((await engine.read(read[1]!.id, 0, 10)).length, 1);
    assert.deepEqual(losses, []);
    await admin(redis.url, (r) => r.xdel("mr:log", read[0]!.id));
    assert.equal(await engine.holds(read[0]!.id), false);
  });
});

Deno.test("redis engine: with a replica online, an append is acknowledged and a read's entries handed over only once the replica has them (WAIT)", async () => {
  const master = await startRedis({ name: "redis-master" });
  const replica = await startRedis({
    name: "redis-replica",
    args: ["--replicaof", "127.0.0.1", String(master.port)],
  });
  const writer = await waitForSync(master.url).then(() =>
    connectRedis(master.url, { logTimeoutMs: 4_000 })
  );
  const reader = await connectRedis(master.url, { logTimeoutMs: 4_000 });
  try {
    await writer.append("warm-up");
    const [first] = await reader.read("0", 0, 10);
    replica.child.kill("SIGSTOP");
    let appended = false;
    const appending = writer.append("held").then(() => appended = true);
    let readBack = false;
    const reading = reader.read(first!.id, 1_000, 10).then((e) => {
      readBack = true;
      return e;
    });
    await new Promise((r) => setTimeout(r, 700));
    assert.equal(appended, false, "acknowledged before the replica had it");
    assert.equal(readBack, false, "handed over before the replica had it");
    replica.child.kill("SIGCONT");
    await appending;
    assert.deepEqual((await reading).map((e) => e.data), ["held"]);
    const onReplica = await admin(replica.url, (r) => r.xlen("mr:log"));
    assert.equal(onReplica, 2);
  } finally {
    replica.child.kill("SIGCONT");
    await writer.close();
    await reader.close();
    await replica.stop();
    await master.stop();
  }
});

async function waitForSync(masterUrl: string): Promise<void> {
  await waitUntil("the replica's first sync", () =>
    admin(
      masterUrl,
      async (r) => /state=online/.test(await r.info("replication")),
    ), 15_000);
}

Deno.test("server: CLUSTER_URL pointing at a Redis that may evict the log (allkeys-lru): the server refuses to start, exit 1, saying why and how to fix it", async () => {
  const evicting = await startRedis({
    args: ["--maxmemory-policy", "allkeys-lru"],
  });
  try {
    const lines: string[] = [];
    await assert.rejects(
      startServerProcess({
        secret: "settings-secret-0123456789",
        env: { CLUSTER_URL: evicting.url },
        onLine: (l) => lines.push(l),
      }),
      /maxmemory-policy is allkeys-lru/,
    );
    const said = lines.join("\n");
    assert.match(
      said,
      /refusing to start: .*allkeys-lru.*CONFIG SET maxmemory-policy noeviction/,
    );
    // The password-free URL is named, so the operator knows which Redis.
    assert.match(said, new RegExp(evicting.url.replaceAll(".", "\\.")));
  } finally {
    await evicting.stop();
  }
});

/**
 * A TCP relay to Redis that, when armed, passes the next XADD on and then cuts
 * both sides before Redis's answer comes back: an append that landed but whose
 * acknowledgement was lost.
 */
async function replyLosingRelay(redisPort: number) {
  const { createServer, createConnection } = await import("node:net");
  let armed = false;
  let cuts = 0;
  const server = createServer((client) => {
    const upstream = createConnection({ host: "127.0.0.1", port: redisPort });
    let cutting = false;
    client.on("data", (b: Uint8Array) => {
      upstream.write(b);
      if (armed && /xadd/i.test(new TextDecoder().decode(b))) {
        armed = false;
        cutting = true;
        cuts++;
        // Long enough for Redis to run it; its answer is not passed on.
        setTimeout(() => {
          client.destroy();
          upstream.destroy();
        }, 50);
      }
    });
    upstream.on("data", (b: Uint8Array) => {
      if (!cutting) client.write(b);
    });
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `redis://127.0.0.1:${port}`,
    arm: () => armed = true,
    get cuts() {
      return cuts;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

Deno.test("redis engine: an append that landed but whose answer was lost is resent, lands twice, and the replicas apply it once", async () => {
  const redis = await startRedis();
  const relay = await replyLosingRelay(redis.port);
  const engine = await connectRedis(relay.url, { logTimeoutMs: 3_000 });
  try {
    const record = (seq: number) =>
      encodeRecord({
        kind: "note",
        instance: "i-test",
        seq,
        appliedMs: null,
        note: { n: seq },
      });
    await engine.append(record(1));
    relay.arm();
    await engine.append(record(2));
    await engine.append(record(3));
    assert.equal(relay.cuts, 1);
    const all = await engine.read("0", 0, 100);
    const cs = initialClusterState(DEFAULT_CONFIG);
    const applied = all.map((e) =>
      applyRecord(cs, decodeRecord(e.data), e.ms).note?.n ?? null
    );
    // Record 2 is in the log twice; its second copy is applied as nothing.
    assert.deepEqual(applied, [1, 2, null, 3]);
  } finally {
    await engine.close();
    await relay.close();
    await redis.stop();
  }
});
