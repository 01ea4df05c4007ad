// ClusterEngine on Redis 7 with ioredis (issues 16, 23; measured in
// shared/design/scale-out.md): the log is the Stream `<prefix>log`, read with
// XREAD BLOCK on a connection of its own (a blocking read would stall every
// other command on a shared one). One Redis, or the master Redis Sentinel
// names (redis_url.ts).
//
// A dropped connection is reconnected at once and what failed on it is sent
// again (redis_link.ts); only silence longer than CLUSTER_LOG_TIMEOUT_MS loses
// the log. Appends go out in order, one pipeline per batch: a batch resent
// after a drop may land twice, and the replicas drop the second copy (records
// carry (instance, seq), core/cluster/replica.ts). When the master has a
// replica online, every write waits for it (one WAIT per batch), and so does
// every read before its entries are applied: no instance acts on an entry that
// a failover to that replica could lose. Imported only in cluster mode.
import { Redis, type RedisOptions } from "ioredis";
import type { Logger } from "../../log.ts";
import type {
  ClusterEngine,
  EngineLoss,
  EngineStatus,
  LogEntry,
} from "./engine.ts";
import { type ClusterUrl, parseClusterUrl } from "./redis_url.ts";
import { logKeepingProblems, readLogSettings } from "./redis_checks.ts";
import { type Link, LogLostError, makeLink, retrying } from "./redis_link.ts";

export type RedisEngineOptions = {
  prefix?: string;
  /** CLUSTER_LOG_TIMEOUT_MS: how long Redis may be silent before the log is lost. */
  logTimeoutMs?: number;
  log?: Logger;
};

export const DEFAULT_LOG_TIMEOUT_MS = 5_000;
/** The longest a read blocks: the reader's command timeout counts on it. */
const READ_BLOCK_MAX_MS = 1_000;

function connectionOptions(
  url: ClusterUrl,
  commandTimeout: number,
): RedisOptions {
  return {
    ...url.options,
    lazyConnect: true,
    // Commands fail at once while disconnected; the engine resends them itself
    // (in order, and never after the log was declared lost).
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    // Reconnect at once, then every 100-500 ms, forever.
    retryStrategy: (times) => times <= 1 ? 0 : Math.min(100 * times, 500),
    connectTimeout: 2000,
    // A Redis that stops answering without closing (frozen, blackholed).
    commandTimeout,
    // A demoted master answers READONLY: reconnect, Sentinel names the new one.
    reconnectOnError: (e) => /^READONLY/.test(e.message),
    ...(url.kind === "sentinel"
      ? {
        sentinelRetryStrategy: (times: number) => Math.min(100 * times, 500),
        // Told by the sentinels of a switch, not only by a dropped connection.
        failoverDetector: true,
      }
      : {}),
  };
}

/** Entry ids are `ms-seq`, compared as numbers. */
function idAfter(a: string, b: string): boolean {
  const [am = 0, as = 0] = a.split("-").map(Number);
  const [bm = 0, bs = 0] = b.split("-").map(Number);
  return am !== bm ? am > bm : as > bs;
}

/** Replicas the master reports online and recently heard from (INFO replication). */
export function onlineReplicas(info: string): number {
  let n = 0;
  for (const m of info.matchAll(/^slave\d+:(.*)$/gm)) {
    const f = Object.fromEntries(
      (m[1] ?? "").split(",").map((kv) => kv.split("=") as [string, string]),
    );
    if (f.state === "online" && Number(f.lag ?? "99") <= 2) n++;
  }
  return n;
}

export async function connectRedis(
  url: string,
  opts: RedisEngineOptions = {},
): Promise<ClusterEngine> {
  const parsed = parseClusterUrl(url);
  const silenceMs = opts.logTimeoutMs ?? DEFAULT_LOG_TIMEOUT_MS;
  const log: Logger = opts.log ?? (() => {});
  const waitMs = Math.max(50, Math.min(1_000, Math.floor(silenceMs / 4)));
  // A WAIT blocks at most waitMs (< silenceMs): no command waits past the limit.
  const cmd = new Redis(connectionOptions(parsed, silenceMs));
  const reader = new Redis(
    connectionOptions(parsed, silenceMs + READ_BLOCK_MAX_MS + waitMs),
  );
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    // Through Sentinel, ioredis retries unreachable sentinels forever: bound it.
    const startMs = Math.max(10_000, silenceMs);
    await Promise.race([
      Promise.all([cmd.connect(), reader.connect()]),
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no answer within ${startMs} ms`)),
          startMs,
        );
      }),
    ]);
    await checkSettings(cmd, log, true);
  } catch (e) {
    // Not reachable (or not fit) at start: stop the background retries, say so.
    cmd.disconnect();
    reader.disconnect();
    throw e;
  } finally {
    clearTimeout(timer);
  }
  return redisEngine({ cmd, reader, silenceMs, waitMs, log, ...opts });
}

/** Logs what keeps this Redis from keeping the log; at start, refuses what must be. */
async function checkSettings(
  r: Redis,
  log: Logger,
  atStart: boolean,
): Promise<void> {
  const problems = logKeepingProblems(await readLogSettings(r));
  for (const p of problems) {
    log(p.severity === "refuse" ? "error" : "warn", p.message, {
      check: "cluster redis settings",
    });
  }
  const refused = problems.find((p) => p.severity === "refuse");
  if (atStart && refused !== undefined) {
    const e = new Error(`refusing to start: ${refused.message}`);
    e.name = "ClusterJoinError";
    throw e;
  }
}

type Conns = {
  cmd: Redis;
  reader: Redis;
  silenceMs: number;
  waitMs: number;
  log: Logger;
  prefix?: string;
};

function redisEngine(c: Conns): ClusterEngine {
  const { cmd, reader, silenceMs, log } = c;
  const prefix = c.prefix ?? "mr:";
  const key = `${prefix}log`;
  const listeners: ((s: EngineStatus, loss: EngineLoss | null) => void)[] = [];
  let closing = false;
  const link = makeLink(silenceMs, (status, loss) => {
    if (closing) return;
    if (loss === null) log("info", "cluster log up again", {});
    else {
      log("error", `cluster log ${loss.kind === "reset" ? "reset" : "down"}`, {
        reason: loss.detail,
      });
    }
    for (const l of listeners) l(status, loss);
  });
  const tail = tailTracker(key, prefix);
  const replicas = replicaWatch(cmd, c.waitMs, silenceMs, log);
  link.onLost((_, kind) => {
    // After a reset, what was tracked belongs to the old log. After silence it
    // is kept: the reconnect checks the log against it (a hold that resumes
    // must not miss a Redis that came back empty or lost its tail).
    if (kind === "reset") tail.forget();
    // A silent Redis may keep its connections open: start those afresh, so
    // the first answer after the silence shows as a reconnect ("up"). One
    // already reconnecting is left alone (cut while Sentinel is asked, ioredis
    // would give it up for good).
    for (const r of [cmd, reader]) {
      if (kind === "silent" && !closing && r.status === "ready") {
        r.disconnect(true);
      }
    }
  });
  watchConnections(c, link, () => closing, async () => {
    await checkSettings(cmd, log, false);
    await replicas.refresh();
    return await tail.regressed(reader);
  });
  const onCmd = <T>(op: () => Promise<T>) =>
    retrying(link, silenceMs, () => cmd.status === "ready", op);
  /** A write, kept once a replica has it (when one is online). */
  const write = <T>(op: () => Promise<T>) =>
    onCmd(async () => {
      const out = await op();
      await replicas.confirm(cmd);
      return out;
    });
  const io: EngineIo = {
    cmd,
    reader,
    link,
    silenceMs,
    prefix,
    key,
    tail,
    replicas,
    onCmd,
    write,
  };
  return {
    append: makeAppender(key, cmd, link, onCmd, replicas),
    read: (afterId, blockMs, count) => readLog(io, afterId, blockMs, count),
    ...sharedKeys(io),
    onStatus(listener) {
      listeners.push(listener);
    },
    async close() {
      closing = true;
      listeners.length = 0;
      link.stop();
      replicas.stop();
      reader.disconnect();
      await cmd.quit().catch(() => cmd.disconnect());
    },
  };
}

type EngineIo = {
  cmd: Redis;
  reader: Redis;
  link: Link;
  silenceMs: number;
  prefix: string;
  key: string;
  tail: ReturnType<typeof tailTracker>;
  replicas: Replicas;
  /** A command on `cmd`, resent across dropped connections. */
  onCmd: <T>(op: () => Promise<T>) => Promise<T>;
  /** The same, then kept once a replica has it (when one is online). */
  write: <T>(op: () => Promise<T>) => Promise<T>;
};

async function readLog(
  io: EngineIo,
  afterId: string,
  blockMs: number,
  count: number,
): Promise<LogEntry[]> {
  const { reader, replicas, tail } = io;
  tail.check(afterId);
  tail.reading(afterId);
  const entries = await retrying(
    io.link,
    io.silenceMs,
    () => reader.status === "ready",
    async () => {
      const out = await readEntries(reader, io.key, afterId, blockMs, count);
      // What this instance applies, a failover must keep: wait for the replica.
      if (out.length > 0 && replicas.expected()) {
        await replicas.confirm(reader, `${io.prefix}replicated`);
      }
      return out;
    },
  );
  tail.read(entries);
  return entries;
}

/** The keys beside the log: epoch, version gate, snapshot, nonces, API keys. */
function sharedKeys(io: EngineIo): Pick<
  ClusterEngine,
  | "epoch"
  | "setIfAbsent"
  | "getSnapshot"
  | "putSnapshot"
  | "holds"
  | "claimOnce"
  | "recordsAll"
  | "recordSet"
  | "recordDelete"
> {
  const { cmd, prefix, write, onCmd } = io;
  return {
    async epoch() {
      const e = await write(async () => {
        await cmd.set(`${prefix}epoch`, crypto.randomUUID(), "NX");
        return (await cmd.get(`${prefix}epoch`)) ?? "";
      });
      io.tail.epoch(e);
      return e;
    },
    setIfAbsent: (k, value) =>
      write(async () => {
        await cmd.set(`${prefix}${k}`, value, "NX");
        return (await cmd.get(`${prefix}${k}`)) ?? value;
      }),
    holds: (id) =>
      onCmd(async () => (await cmd.xrange(io.key, id, id)).length > 0),
    async getSnapshot() {
      const text = await onCmd(() => cmd.get(`${prefix}snap`));
      return text === null ? null : JSON.parse(text);
    },
    putSnapshot: (snapshot, trimBeforeId) =>
      write(async () => {
        await cmd.set(`${prefix}snap`, JSON.stringify(snapshot));
        if (trimBeforeId !== null) {
          await cmd.xtrim(io.key, "MINID", trimBeforeId);
        }
      }),
    claimOnce(k, expiresAtSecs) {
      // A token of our own: a claim resent after a lost answer finds itself.
      const token = crypto.randomUUID();
      const name = `${prefix}once:${k}`;
      const exat = Math.max(1, Math.ceil(expiresAtSecs));
      return write(async () =>
        (await cmd.set(name, token, "EXAT", exat, "NX")) === "OK" ||
        (await cmd.get(name)) === token
      );
    },
    recordsAll: () => onCmd(() => cmd.hgetall(`${prefix}keys`)),
    recordSet: (id, value) =>
      write(async () => void await cmd.hset(`${prefix}keys`, id, value)),
    recordDelete: (id) =>
      write(async () => void await cmd.hdel(`${prefix}keys`, id)),
  };
}

async function readEntries(
  reader: Redis,
  key: string,
  afterId: string,
  blockMs: number,
  count: number,
): Promise<LogEntry[]> {
  // BLOCK 0 would wait forever: a catch-up read (blockMs 0) does not block.
  const block = Math.min(blockMs, READ_BLOCK_MAX_MS);
  const res = block > 0
    ? await reader.xread(
      "COUNT",
      count,
      "BLOCK",
      block,
      "STREAMS",
      key,
      afterId,
    )
    : await reader.xread("COUNT", count, "STREAMS", key, afterId);
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
}

/**
 * Marks the link blinking when a connection drops, and restored once every
 * connection is ready again and `recheck` passed (settings, replicas, the
 * log's tail); a recheck that finds another log declares it reset.
 */
function watchConnections(
  c: Conns,
  link: Link,
  closing: () => boolean,
  recheck: () => Promise<string | null>,
): void {
  let checking = false;
  let again = false;
  const onReady = async () => {
    if (c.cmd.status !== "ready" || c.reader.status !== "ready") return;
    if (link.state === "up") return;
    if (checking) {
      again = true;
      return;
    }
    checking = true;
    try {
      const regressed = await recheck();
      link.restored();
      if (regressed !== null) link.lose("reset", regressed);
    } catch (e) {
      // Dropped again while checking: the next ready checks again.
      c.log("debug", "cluster redis recheck failed", { error: String(e) });
    } finally {
      checking = false;
      if (again) {
        again = false;
        void onReady();
      }
    }
  };
  for (const r of [c.cmd, c.reader]) {
    r.on("close", () => link.blink());
    r.on("end", () => {
      link.blink();
      // ioredis gave this connection up (its reconnect was cut): start it
      // again; the engine alone decides when to stop trying.
      if (!closing()) {
        setTimeout(() => {
          if (!closing() && r.status === "end") r.connect().catch(() => {});
        }, 500);
      }
    });
    r.on("ready", () => void onReady());
    r.on("error", () => {}); // reported through the link; ioredis retries
  }
}

/** The log this instance applied: its epoch and the last entry it read. */
function tailTracker(key: string, prefix: string) {
  let epoch: string | null = null;
  let last: string | null = null;
  /** An entry found missing after a reconnect: no read may go on after it. */
  let gone: string | null = null;
  return {
    /** Refuses a read after an entry the log lost: it would skip the hole silently. */
    check(afterId: string) {
      if (afterId === gone) {
        throw new LogLostError(
          `the log lost its tail: entry ${afterId} is no longer in Redis; rejoin from the snapshot`,
        );
      }
    },
    epoch(e: string) {
      epoch = e;
    },
    reading(afterId: string) {
      last = afterId === "0" ? null : afterId;
    },
    read(entries: LogEntry[]) {
      const id = entries.at(-1)?.id;
      if (id !== undefined) last = id;
    },
    forget() {
      epoch = null;
      last = null;
    },
    /** Why the log behind this connection is not the one applied here, or null. */
    async regressed(r: Redis): Promise<string | null> {
      if (epoch !== null) {
        const now = await r.get(`${prefix}epoch`);
        if (now !== epoch) {
          return `the log's epoch changed (${epoch} -> ${
            now ?? "none"
          }): Redis lost or replaced its data`;
        }
      }
      if (last === null) return null;
      if ((await r.xrange(key, last, last)).length > 0) return null;
      const first = (await r.xrange(key, "-", "+", "COUNT", 1))[0]?.[0];
      // Trimmed past it (behind a snapshot) is not a loss.
      if (first !== undefined && idAfter(first, last)) return null;
      gone = last;
      return `the log lost its tail: entry ${last}, applied here, is no longer in Redis (a failover to a replica that lagged?)`;
    },
  };
}

type Replicas = ReturnType<typeof replicaWatch>;

/**
 * How many replicas the master has online, refreshed every second, and the
 * WAIT that keeps a write (or a read's entries) once one of them has it.
 */
function replicaWatch(
  cmd: Redis,
  waitMs: number,
  silenceMs: number,
  log: Logger,
) {
  let online = 0;
  let warned = false;
  const refresh = async () => {
    online = onlineReplicas(await cmd.info("replication"));
    return online;
  };
  const timer = setInterval(() => {
    if (cmd.status === "ready") refresh().catch(() => {});
  }, 1_000);
  void refresh().catch(() => {});
  return {
    refresh,
    expected: () => online > 0,
    /** Waits (WAIT 1) until a replica has what `r` wrote, while one is online. */
    async confirm(r: Redis, markChannel?: string): Promise<void> {
      if (online === 0) return;
      // A reader has written nothing: a PUBLISH (replicated) marks its position.
      if (markChannel !== undefined) await r.publish(markChannel, "");
      const until = Date.now() + silenceMs;
      while (Date.now() < until) {
        if (Number(await r.call("WAIT", "1", String(waitMs))) >= 1) {
          warned = false;
          return;
        }
        if (await refresh() === 0) return;
      }
      if (!warned) {
        warned = true;
        log("warn", "cluster writes are not confirmed by a Redis replica", {
          waited_ms: silenceMs,
        });
      }
    },
    stop: () => clearInterval(timer),
  };
}

type Pending = { data: string; resolve(): void; reject(e: unknown): void };

/**
 * Appends in call order, one pipeline (and one WAIT) per batch: what queues
 * while a batch is out goes in the next. A batch that fails on a dropped
 * connection is resent whole once it is back (duplicates are dropped by the
 * replicas); when the log is lost, every pending append is rejected.
 */
function makeAppender(
  key: string,
  cmd: Redis,
  link: Link,
  onCmd: <T>(op: () => Promise<T>) => Promise<T>,
  replicas: Replicas,
): (data: string) => Promise<void> {
  let queue: Pending[] = [];
  let pumping = false;
  link.onLost((e) => {
    const q = queue;
    queue = [];
    for (const p of q) p.reject(e);
  });
  const writeBatch = async (batch: Pending[]) => {
    const p = cmd.pipeline();
    for (const x of batch) p.xadd(key, "*", "d", x.data);
    const results = await p.exec();
    for (const [err] of results ?? []) if (err) throw err;
    await replicas.confirm(cmd);
  };
  const pump = async () => {
    pumping = true;
    while (queue.length > 0) {
      const batch = queue;
      queue = [];
      try {
        await onCmd(() => writeBatch(batch));
        for (const x of batch) x.resolve();
      } catch (e) {
        for (const x of batch) x.reject(e);
      }
    }
    pumping = false;
  };
  return (data) =>
    new Promise<void>((resolve, reject) => {
      queue.push({ data, resolve, reject });
      if (!pumping) void pump();
    });
}
