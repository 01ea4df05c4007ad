// Test-only (and bench:e2e --cluster): a private redis-server on a free loopback
// port, without persistence (it writes no file), nothing shared with other tests
// (the servers' loopback-only net permission covers TCP; a unix socket would
// need a broader one); and for issue 23 a Sentinel set (master, replica, three
// sentinels, their config files in a temporary directory). When redis-server
// or redis-sentinel is missing and we are root with apt-get (as on CI),
// installs Debian's package (shell/_apt.ts); otherwise fails with one line
// saying how.
import { Redis } from "ioredis";
import { aptInstall, which } from "../../_apt.ts";
import { type Child, spawnProgram } from "../../procs.ts";

const howTo = (program: string, pkg: string) =>
  `no ${program} for the cluster tests: run \`sudo apt-get install -y ${pkg}\` (Debian/Ubuntu) or put ${program} on PATH`;

const found = new Map<string, Promise<string>>();

/** The path of `program`, apt-installing Debian's `pkg` first when missing and root. */
function ensureProgram(program: string, pkg: string): Promise<string> {
  const known = found.get(program);
  if (known !== undefined) return known;
  const p = (async () => {
    const have = await which(program);
    if (have !== null) return have;
    if (await aptInstall(pkg, "cluster tests")) {
      const now = await which(program);
      if (now !== null) return now;
    }
    throw new Error(howTo(program, pkg));
  })();
  found.set(program, p);
  return p;
}

export function ensureRedis(): Promise<string> {
  return ensureProgram("redis-server", "redis-server");
}

/** Debian's redis-sentinel package (its own binary; redis-server is its dependency). */
export function ensureRedisSentinel(): Promise<string> {
  return ensureProgram("redis-sentinel", "redis-sentinel");
}

export type RedisProcess = {
  /** CLUSTER_URL for the servers. */
  url: string;
  port: number;
  child: Child;
  /** Starts it again on the same port, empty (no persistence): an engine loss. */
  restart(): Promise<void>;
  stop(): Promise<void>;
};

/** A free loopback port: taken from the OS, released, then given to a server. */
function freeLoopbackPort(): number {
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (probe.addr as Deno.NetAddr).port;
  probe.close();
  return port;
}

async function startServer(
  name: string,
  program: string,
  args: string[],
): Promise<Child> {
  const c = spawnProgram({ name, program, args, linesKept: 200 });
  try {
    await c.waitForLine(/ready to accept connections|Sentinel ID is/i, 10_000);
  } catch (e) {
    await c.stop(1_000);
    throw new Error(`${name} did not start: ${c.lines.join("\n")}`, {
      cause: e,
    });
  }
  return c;
}

/** A private redis-server; `args` adds settings (e.g. --maxmemory-policy allkeys-lru). */
export async function startRedis(
  opts: { args?: string[]; name?: string } = {},
): Promise<RedisProcess> {
  const bin = await ensureRedis();
  // The port is kept across restarts, so instances reconnect to the same address.
  const port = freeLoopbackPort();
  const args = [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--save",
    "",
    "--appendonly",
    "no",
    // A replica writes the RDB it receives to disk, and in the working
    // directory that was the repository (a dump.rdb committed once): every
    // server's file goes to the temporary directory, named for its port.
    "--dir",
    Deno.env.get("TMPDIR") ?? "/tmp",
    "--dbfilename",
    `relay-test-${port}.rdb`,
    ...(opts.args ?? []),
  ];
  const start = () => startServer(opts.name ?? "redis", bin, args);
  let child = await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    get child() {
      return child;
    },
    async restart() {
      await child.stop(1_000);
      child = await start();
    },
    async stop() {
      await child.stop(1_000);
    },
  };
}

export type SentinelSet = {
  /** CLUSTER_URL: redis-sentinel://127.0.0.1:p1,…/relay */
  url: string;
  /** The data servers, started as master (0) and replica (1). */
  servers: RedisProcess[];
  sentinels: Child[];
  /** The data server the sentinels name master now. */
  master(): Promise<RedisProcess>;
  stop(): Promise<void>;
};

export const SENTINEL_MASTER_NAME = "relay";

/** Waits until the master reports `n` replicas online (their first sync done). */
async function replicasInSync(port: number, n: number): Promise<void> {
  const r = new Redis({ host: "127.0.0.1", port });
  try {
    const until = Date.now() + 20_000;
    for (;;) {
      const info = await r.info("replication");
      if ((info.match(/^slave\d+:.*state=online/gm) ?? []).length >= n) return;
      if (Date.now() > until) {
        throw new Error(`replicas not in sync within 20 s:\n${info}`);
      }
      await new Promise((ok) => setTimeout(ok, 100));
    }
  } finally {
    r.disconnect();
  }
}

/**
 * One master, `replicas` replicas and three sentinels (quorum 2) on loopback,
 * each sentinel with its own config file (Sentinel rewrites it) in a
 * temporary directory. Failover is quick for tests: a master silent for 1 s
 * is down.
 */
export async function startSentinelSet(
  opts: { replicas?: number } = {},
): Promise<SentinelSet> {
  const sentinelBin = await ensureRedisSentinel();
  const dir = await Deno.makeTempDir({ prefix: "relay-sentinel-" });
  const servers: RedisProcess[] = [];
  const sentinels: Child[] = [];
  const stop = async () => {
    for (const c of sentinels) await c.stop(1_000);
    for (const r of servers) await r.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  try {
    // No 5 s wait before the first (diskless) sync of a replica.
    const master = await startRedis({
      name: "redis-master",
      args: ["--repl-diskless-sync-delay", "0"],
    });
    servers.push(master);
    for (let i = 0; i < (opts.replicas ?? 1); i++) {
      servers.push(
        await startRedis({
          name: `redis-replica${i + 1}`,
          args: ["--replicaof", "127.0.0.1", String(master.port)],
        }),
      );
    }
    await replicasInSync(master.port, servers.length - 1);
    const ports: number[] = [];
    for (let i = 0; i < 3; i++) {
      const port = freeLoopbackPort();
      const conf = `${dir}/sentinel${i}.conf`;
      await Deno.writeTextFile(
        conf,
        [
          `port ${port}`,
          "bind 127.0.0.1",
          `dir ${dir}`,
          `sentinel monitor ${SENTINEL_MASTER_NAME} 127.0.0.1 ${master.port} 2`,
          `sentinel down-after-milliseconds ${SENTINEL_MASTER_NAME} 1000`,
          `sentinel failover-timeout ${SENTINEL_MASTER_NAME} 5000`,
          `sentinel parallel-syncs ${SENTINEL_MASTER_NAME} 1`,
          "",
        ].join("\n"),
      );
      sentinels.push(await startServer(`sentinel${i}`, sentinelBin, [conf]));
      ports.push(port);
    }
    return {
      url: `redis-sentinel://${
        ports.map((p) => `127.0.0.1:${p}`).join(",")
      }/${SENTINEL_MASTER_NAME}`,
      servers,
      sentinels,
      async master() {
        const r = new Redis({ host: "127.0.0.1", port: ports[0]! });
        try {
          const addr = await r.call(
            "SENTINEL",
            "get-master-addr-by-name",
            SENTINEL_MASTER_NAME,
          ) as [string, string];
          return servers.find((s) => s.port === Number(addr[1]))!;
        } finally {
          r.disconnect();
        }
      },
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** One redis-cli command against `url`; its output, trimmed (stderr dropped). */
export async function redisCli(
  url: string,
  ...args: string[]
): Promise<string> {
  const out = await new Deno.Command("redis-cli", {
    args: ["-u", url, ...args],
    stdout: "piped",
    stderr: "null",
  }).output();
  return new TextDecoder().decode(out.stdout).trim();
}
