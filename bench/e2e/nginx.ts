// nginx as the third path of bench:e2e (issue 18, "Close to nginx"): the same
// backend behind Debian's nginx-light, configured as a streaming reverse proxy
// would be in a real deployment (no buffering either way, HTTP/1.1 keep-alive to
// the backend). Finding or installing the binary, the generated config, and a
// private nginx (own prefix, config, pid file and error log in a directory under
// bench/results, which bench:e2e may already write) that teardown always stops.
import { runProgram, waitUntil } from "../../shell/procs.ts";
import { childPids } from "./cpu.ts";
import { getJson, type Proc, spawn } from "./procs.ts";

export type NginxBinary =
  | { kind: "found"; path: string }
  | { kind: "unavailable"; reason: string };

const CANDIDATES = ["/usr/sbin/nginx"];

async function isFile(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch {
    return false;
  }
}

async function which(cmd: string): Promise<string | null> {
  const dirs = (Deno.env.get("PATH") ?? "/usr/bin").split(":");
  for (const dir of dirs) {
    if (await isFile(`${dir}/${cmd}`)) return `${dir}/${cmd}`;
  }
  for (const path of CANDIDATES) {
    if (path.endsWith(`/${cmd}`) && await isFile(path)) return path;
  }
  return null;
}

/** Runs a command to completion; returns null on success, else the tail of its stderr. */
async function run(cmd: string, args: string[]): Promise<string | null> {
  const out = await runProgram(cmd, args, {
    DEBIAN_FRONTEND: "noninteractive",
  });
  if (out.code === 0) return null;
  return out.stderr.trim().slice(-300) || `exit code ${out.code}`;
}

/** What ensureNginx asks of the system; tests pass their own. */
export type NginxSystem = {
  which(cmd: string): Promise<string | null>;
  /** The effective uid, or null when it cannot be read (no --allow-sys). */
  uid(): number | null;
  /** Runs a command to completion: null on success, else why it failed. */
  run(cmd: string, args: string[]): Promise<string | null>;
};

const SYSTEM: NginxSystem = {
  which,
  uid: () => {
    try {
      return Deno.uid();
    } catch {
      return null;
    }
  },
  run,
};

/**
 * nginx on PATH or in /usr/sbin; otherwise, as root with apt-get, installs
 * Debian's nginx-light (running `apt-get update` first only if the install
 * fails, e.g. for a missing package index), as the cluster tests do for
 * redis-server. Never throws: the bench then runs without the nginx path.
 */
export async function ensureNginx(
  log: (line: string) => void,
): Promise<NginxBinary> {
  const { binary, installed } = await findOrInstallNginx(SYSTEM, log);
  if (binary.kind === "found" && installed) {
    await stopSystemNginx(binary.path, log);
  }
  return binary;
}

/** The decisions of ensureNginx, over an injected system (unit-tested). */
export async function findOrInstallNginx(
  sys: NginxSystem,
  log: (line: string) => void,
): Promise<{ binary: NginxBinary; installed: boolean }> {
  const have = await sys.which("nginx");
  if (have !== null) {
    return { binary: { kind: "found", path: have }, installed: false };
  }
  const unavailable = (reason: string) => ({
    binary: { kind: "unavailable", reason } as const,
    installed: false,
  });
  if (sys.uid() !== 0) {
    return unavailable(
      "nginx not installed and not root (apt-get install -y nginx-light)",
    );
  }
  if (await sys.which("apt-get") === null) {
    return unavailable("nginx not installed, no apt-get");
  }
  log("installing nginx-light with apt-get (the nginx path of bench:e2e)");
  // Waits for the dpkg lock: another test may be installing at the same time.
  const apt = ["-o", "DPkg::Lock::Timeout=600"];
  let err = await sys.run("apt-get", [...apt, "install", "-y", "nginx-light"]);
  if (err !== null) {
    const update = await sys.run("apt-get", [...apt, "update"]);
    err = update ??
      await sys.run("apt-get", [...apt, "install", "-y", "nginx-light"]);
  }
  if (err !== null) {
    return unavailable(
      `apt-get install nginx-light failed: ${err.split("\n").pop() ?? err}`,
    );
  }
  const now = await sys.which("nginx");
  if (now === null) {
    return unavailable("nginx-light installed but no nginx binary found");
  }
  return { binary: { kind: "found", path: now }, installed: true };
}

/** A just-installed package may have started the system nginx: stop it. */
async function stopSystemNginx(
  now: string,
  log: (line: string) => void,
): Promise<void> {
  // Without a policy-rc.d that forbids it, the package's postinst starts the
  // system nginx on port 80: stop it, the bench leaves no process behind.
  if (await isFile("/run/nginx.pid")) {
    log("stopping the system nginx the package started");
    await run(now, ["-s", "quit"]);
  }
}

/** One proxied port: nginx listens on `listenPort` and forwards to `backend` (host:port). */
export type NginxRoute = { name: string; listenPort: number; backend: string };

/**
 * The whole config, pure (unit-tested). Everything nginx writes goes under
 * `prefix`; one server block per route, each with its own upstream holding 64
 * idle keep-alive connections to the backend. Against a real llama-server
 * (cpp-httplib closes a connection idle for 5 s) nginx answered 502 when it
 * reused a connection the backend had just closed: idle connections are
 * dropped after 4 s, and a request that fails on a reused connection before
 * any answer is sent again on a fresh one (`non_idempotent`, since these are
 * POSTs), as the relay's worker and Deno's own HTTP client do.
 */
export function nginxConfig(prefix: string, routes: NginxRoute[]): string {
  const upstreams = routes.map((r) =>
    `  upstream ${r.name} {
    server ${r.backend};
    keepalive 64;
    keepalive_requests 1000000;
    keepalive_timeout 4s;
  }
`
  ).join("");
  const servers = routes.map((r) =>
    `  server {
    listen 127.0.0.1:${r.listenPort};
    location / {
      proxy_pass http://${r.name};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_next_upstream error timeout non_idempotent;
      proxy_read_timeout 3600s;
      proxy_send_timeout 3600s;
    }
  }
`
  ).join("");
  return `# Generated by bench/e2e/nginx.ts for one bench:e2e run.
worker_processes auto;
worker_rlimit_nofile 16384;
pid ${prefix}/nginx.pid;
error_log ${prefix}/error.log warn;

events {
  worker_connections 8192;
}

http {
  access_log off;
  client_body_temp_path ${prefix}/client_body;
  proxy_temp_path ${prefix}/proxy;
  # The load generator keeps its connections alive, as it does with the relay.
  keepalive_requests 1000000;
  keepalive_timeout 300s;

${upstreams}
${servers}}
`;
}

export type Nginx = {
  /** The master, spawned by us; its workers are in `workerPids`. */
  proc: Proc;
  workerPids: number[];
  /** route name → http://127.0.0.1:<port> */
  urls: Record<string, string>;
  config: string;
  /** SIGQUIT (graceful), SIGTERM, then SIGKILL; removes the directory. */
  stop(): Promise<void>;
};

/**
 * nginx's arguments to run in the foreground (`daemon off`) on
 * `dir`/nginx.conf, with `dir` as its prefix and for its error log.
 */
export function foregroundArgs(dir: string): string[] {
  return [
    "-c",
    `${dir}/nginx.conf`,
    "-p",
    dir,
    "-e",
    `${dir}/error.log`,
    "-g",
    "daemon off;",
  ];
}

/**
 * Starts nginx in the foreground (`daemon off`, master_process on) with a
 * generated config in `dir`, and waits until every route answers
 * GET /v1/models through it and the workers are up.
 */
export async function startNginx(
  bin: string,
  dir: string,
  routes: { name: string; backend: string }[],
  freePort: () => number,
): Promise<Nginx> {
  await Deno.mkdir(dir, { recursive: true });
  const withPorts = routes.map((r) => ({ ...r, listenPort: freePort() }));
  const config = nginxConfig(dir, withPorts);
  await Deno.writeTextFile(`${dir}/nginx.conf`, config);
  const proc = spawn("nginx", foregroundArgs(dir), {}, bin);
  const urls: Record<string, string> = {};
  for (const r of withPorts) urls[r.name] = `http://127.0.0.1:${r.listenPort}`;
  const stop = async () => {
    proc.kill("SIGQUIT");
    const term = setTimeout(() => proc.kill("SIGTERM"), 5000);
    const kill = setTimeout(() => proc.kill("SIGKILL"), 10_000);
    try {
      await proc.status;
    } finally {
      clearTimeout(term);
      clearTimeout(kill);
    }
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  try {
    for (const r of withPorts) {
      await waitUntil(
        `nginx on ${urls[r.name]}`,
        async () => {
          await getJson(`${urls[r.name]}/v1/models`);
          return true;
        },
        30_000,
        proc,
      );
    }
    // worker_processes auto: one per CPU nginx sees; they answered above, so
    // they are forked; a short pause lets the last of them show up.
    await new Promise((r) => setTimeout(r, 200));
    const workerPids = childPids(proc.pid);
    if (workerPids.length === 0) throw new Error("no nginx worker process");
    return { proc, workerPids, urls, config, stop };
  } catch (e) {
    const errorLog = await Deno.readTextFile(`${dir}/error.log`).catch(() =>
      ""
    );
    await stop();
    throw new Error(
      `nginx did not come up: ${
        e instanceof Error ? e.message : e
      }\n${errorLog}`,
    );
  }
}
