// Test-only (and bench:e2e --cluster): a private redis-server on a free loopback
// port, without persistence (it writes no file), nothing shared with other tests
// (the servers' loopback-only net permission covers TCP; a unix socket would
// need a broader one). When redis-server is missing and we are root
// with apt-get (as on CI), installs Debian's `redis-server` package, as
// _chromium.ts does for Chromium; otherwise fails with one line saying how.
import { type Child, spawnProgram } from "../../procs.ts";

const HOW_TO =
  "no redis-server for the cluster tests: run `sudo apt-get install -y redis-server` (Debian/Ubuntu) or put redis-server on PATH";

async function which(cmd: string): Promise<string | null> {
  for (const dir of (Deno.env.get("PATH") ?? "/usr/bin").split(":")) {
    try {
      if ((await Deno.stat(`${dir}/${cmd}`)).isFile) return `${dir}/${cmd}`;
    } catch {
      // not in this directory
    }
  }
  return null;
}

async function run(cmd: string, args: string[]): Promise<boolean> {
  const out = await new Deno.Command(cmd, {
    args,
    env: { DEBIAN_FRONTEND: "noninteractive" },
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!out.success) {
    console.error(new TextDecoder().decode(out.stderr).trim().slice(-500));
  }
  return out.success;
}

let found: Promise<string> | null = null;

export function ensureRedis(): Promise<string> {
  found ??= (async () => {
    const have = await which("redis-server");
    if (have !== null) return have;
    const uid = new TextDecoder().decode(
      (await new Deno.Command("id", { args: ["-u"], stdout: "piped" })
        .output()).stdout,
    ).trim();
    if (uid === "0" && await which("apt-get") !== null) {
      console.error("installing redis-server with apt-get (cluster tests)");
      if (
        await run("apt-get", ["install", "-y", "redis-server"]) ||
        (await run("apt-get", ["update"]) &&
          await run("apt-get", ["install", "-y", "redis-server"]))
      ) {
        const now = await which("redis-server");
        if (now !== null) return now;
      }
    }
    throw new Error(HOW_TO);
  })();
  return found;
}

export type RedisProcess = {
  /** CLUSTER_URL for the servers. */
  url: string;
  child: Child;
  /** Starts it again on the same socket, empty (no persistence): an engine loss. */
  restart(): Promise<void>;
  stop(): Promise<void>;
};

export async function startRedis(): Promise<RedisProcess> {
  const bin = await ensureRedis();
  // A free port: taken from the OS, released, then given to redis-server (kept
  // across restarts, so instances reconnect to the same address).
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (probe.addr as Deno.NetAddr).port;
  probe.close();
  const start = async () => {
    const c = spawnProgram({
      name: "redis",
      program: bin,
      args: [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
      ],
    });
    try {
      await c.waitForLine(/ready to accept connections/i, 10_000);
    } catch (e) {
      await c.stop(1_000);
      throw new Error(`redis-server did not start: ${c.lines.join("\n")}`, {
        cause: e,
      });
    }
    return c;
  };
  let child = await start();
  return {
    url: `redis://127.0.0.1:${port}`,
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
