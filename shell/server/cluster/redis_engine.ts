// ClusterEngine on Redis 7 with ioredis (issue 16; measured in
// shared/design/scale-out.md): the log is the Stream `<prefix>log`, read with
// XREAD BLOCK on a connection of its own (a blocking read would stall every
// other command on a shared one). Commands fail fast while disconnected
// (no offline queue): the runtime must learn of an outage at once, not replay
// stale appends later. Imported only in cluster mode.
import { Redis, type RedisOptions } from "ioredis";
import type { ClusterEngine, EngineStatus, LogEntry } from "./engine.ts";

/** redis://host:port/db, rediss://…, or unix:///path/to/redis.sock. */
export function redisOptions(url: string): RedisOptions & { path?: string } {
  const base: RedisOptions = {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    // Reconnect forever, quickly: the cluster is unavailable until it does.
    retryStrategy: (times) => Math.min(100 * times, 1000),
    connectTimeout: 2000,
    // A Redis that stops answering without closing (frozen, blackholed) is an
    // engine loss too: no command may wait longer than this (reads block 1 s).
    commandTimeout: 3000,
  };
  if (url.startsWith("unix:")) {
    return { ...base, path: new URL(url).pathname };
  }
  const u = new URL(url);
  const db = Number(u.pathname.slice(1) || "0");
  return {
    ...base,
    host: u.hostname,
    port: Number(u.port || "6379"),
    db,
    ...(u.password === "" ? {} : { password: decodeURIComponent(u.password) }),
    ...(u.username === "" ? {} : { username: decodeURIComponent(u.username) }),
    ...(u.protocol === "rediss:" ? { tls: {} } : {}),
  };
}

export async function connectRedis(
  url: string,
  prefix = "mr:",
): Promise<ClusterEngine> {
  const options = redisOptions(url);
  const cmd = new Redis(options);
  const reader = new Redis(options);
  const listeners: ((s: EngineStatus) => void)[] = [];
  let status: EngineStatus = "down";
  const set = (s: EngineStatus) => {
    if (s === status) return;
    status = s;
    for (const l of listeners) l(s);
  };
  // Both connections must be ready for the cluster to be up.
  const update = () =>
    set(cmd.status === "ready" && reader.status === "ready" ? "up" : "down");
  for (const c of [cmd, reader]) {
    c.on("ready", update);
    c.on("close", update);
    c.on("end", update);
    c.on("error", () => {}); // reported through status; ioredis retries
  }
  try {
    await Promise.all([cmd.connect(), reader.connect()]);
  } catch (e) {
    // Not reachable at start: stop the background retries and say so.
    cmd.disconnect();
    reader.disconnect();
    throw e;
  }
  update();
  const log = `${prefix}log`;
  return {
    async append(data) {
      await cmd.xadd(log, "*", "d", data);
    },
    async read(afterId, blockMs, count) {
      // BLOCK 0 would wait forever: a catch-up read (blockMs 0) does not block.
      const res = blockMs > 0
        ? await reader.xread(
          "COUNT",
          count,
          "BLOCK",
          blockMs,
          "STREAMS",
          log,
          afterId,
        )
        : await reader.xread("COUNT", count, "STREAMS", log, afterId);
      if (res === null) return [];
      const out: LogEntry[] = [];
      for (const [, entries] of res) {
        for (const [id, fields] of entries) {
          out.push({
            id,
            ms: Number(id.slice(0, id.indexOf("-"))),
            data: fields[1] ?? "",
          });
        }
      }
      return out;
    },
    async epoch() {
      await cmd.set(`${prefix}epoch`, crypto.randomUUID(), "NX");
      return (await cmd.get(`${prefix}epoch`)) ?? "";
    },
    async setIfAbsent(key, value) {
      await cmd.set(`${prefix}${key}`, value, "NX");
      return (await cmd.get(`${prefix}${key}`)) ?? value;
    },
    async getSnapshot() {
      const text = await cmd.get(`${prefix}snap`);
      return text === null ? null : JSON.parse(text);
    },
    async putSnapshot(snapshot, trimBeforeId) {
      await cmd.set(`${prefix}snap`, JSON.stringify(snapshot));
      if (trimBeforeId !== null) {
        await cmd.xtrim(log, "MINID", trimBeforeId);
      }
    },
    async claimOnce(key, expiresAtSecs) {
      const ok = await cmd.set(
        `${prefix}once:${key}`,
        "1",
        "EXAT",
        Math.max(1, Math.ceil(expiresAtSecs)),
        "NX",
      );
      return ok === "OK";
    },
    async recordsAll() {
      return await cmd.hgetall(`${prefix}keys`);
    },
    async recordSet(id, value) {
      await cmd.hset(`${prefix}keys`, id, value);
    },
    async recordDelete(id) {
      await cmd.hdel(`${prefix}keys`, id);
    },
    onStatus(listener) {
      listeners.push(listener);
    },
    async close() {
      listeners.length = 0;
      reader.disconnect();
      await cmd.quit().catch(() => cmd.disconnect());
    },
  };
}
