// The three processes of a relay on loopback — mock backend, server, workers —
// each started as `deno run` with the permissions it needs and nothing more.
// The one way to start them: `deno task demo`, the end-to-end tests, the
// cluster tests and the benchmarks (bench/e2e/procs.ts) all start them here,
// and stop them with shell/procs.ts (stopInReverse, withChildren).
import { SERVER_OPTIONS } from "../server/config.ts";
import { WORKER_OPTIONS } from "../worker/config.ts";
import { type Child, spawnChild, waitUntil } from "../procs.ts";
import { workersConnected } from "./relay_probes.ts";

/** Loopback only: the demo and the tests never reach beyond this machine. */
const LOOPBACK = "--allow-net=127.0.0.1,localhost";

export const PERMISSIONS = {
  mock: [LOOPBACK],
  server: [LOOPBACK, "--allow-env", "--allow-read", "--allow-write"],
  worker: [LOOPBACK, "--allow-env", "--allow-read", "--allow-sys=hostname"],
} as const;

/**
 * Every variable the server or worker reads, removed from the children's
 * environment so a stray LISTEN_ADDR or MODELS in the caller's shell cannot
 * change what the demo or a test runs.
 */
export const RELAY_ENV = [
  ...[...SERVER_OPTIONS, ...WORKER_OPTIONS].flatMap((o) => [
    o.env,
    ...(o.envAliases ?? []),
  ]).filter((name) => name !== ""),
  "QUEUE_TIMEOUT_MS",
  "RUST_LOG",
];

export type Running = { child: Child; url: string };

/** What every started process takes besides its own settings. */
type ProcessOpts = {
  onLine?: (line: string) => void;
  /** Own process group (see ChildSpec.detached); the demo sets it. */
  detached?: boolean;
  /** Keep about this many of the latest lines (ChildSpec.linesKept): a long benchmark run. */
  linesKept?: number;
  /** Deno flags before the script, e.g. --cpu-prof or another checkout's --config (the benchmarks). */
  denoFlags?: string[];
  /** Other permissions than the process's own PERMISSIONS (a benchmark's backend may be on another host). */
  permissions?: readonly string[];
};

/** The spawnChild fields that carry ProcessOpts, for a process whose own permissions are `own`. */
function processSpec(opts: ProcessOpts, own: readonly string[]) {
  return {
    permissions: [...(opts.denoFlags ?? []), ...(opts.permissions ?? own)],
    ...(opts.onLine ? { onLine: opts.onLine } : {}),
    ...(opts.linesKept === undefined ? {} : { linesKept: opts.linesKept }),
    detached: opts.detached ?? false,
  };
}

/** How long a started process may take to say it is ready. */
const READY_MS = 30_000;

export async function startMockProcess(
  opts: {
    script?: string;
    delayMs: number;
    models?: string[];
    port?: number;
    /** More flags for the mock, e.g. ["--api-key", "k"]. */
    args?: string[];
  } & ProcessOpts,
): Promise<Running> {
  const child = spawnChild({
    name: "mock",
    script: opts.script ?? "mock/main.ts",
    args: [
      "--port",
      String(opts.port ?? 0),
      "--delay-ms",
      String(opts.delayMs),
      "--models",
      (opts.models ?? ["mock-model"]).join(","),
      ...(opts.args ?? []),
    ],
    ...processSpec(opts, PERMISSIONS.mock),
  });
  const m = await awaitOrStop(
    child,
    child.waitForLine(/listening on (http:\/\/\S+)/, READY_MS),
  );
  return { child, url: m[1]! };
}

export async function startServerProcess(
  opts: {
    secret: string;
    port?: number;
    adminToken?: string;
    env?: Record<string, string>;
    /** Log prefix (default "server"). */
    name?: string;
    /** Another server entry (default shell/server/main.ts). */
    script?: string;
  } & ProcessOpts,
): Promise<Running> {
  const child = spawnChild({
    name: opts.name ?? "server",
    script: opts.script ?? "shell/server/main.ts",
    env: {
      LISTEN_ADDR: `127.0.0.1:${opts.port ?? 0}`,
      WORKER_SECRET: opts.secret,
      MODELRELAY_DB_PATH: ":memory:",
      ...(opts.adminToken ? { MODELRELAY_ADMIN_TOKEN: opts.adminToken } : {}),
      ...opts.env,
    },
    unsetEnv: RELAY_ENV,
    ...processSpec(opts, PERMISSIONS.server),
  });
  const m = await awaitOrStop(
    child,
    child.waitForLine(/server listening address=(\S+)/, READY_MS),
  );
  return { child, url: `http://${m[1]}` };
}

/** A worker's own settings: its name, its backend and how much it takes. */
export type WorkerSpec = {
  name: string;
  backendUrl: string;
  maxConcurrent?: number;
  env?: Record<string, string>;
  /** Another worker entry (default shell/worker/main.ts). */
  script?: string;
};

/** Starts a worker and resolves once the proxy acknowledged its registration. */
export async function startWorkerProcess(
  opts: WorkerSpec & { serverUrl: string; secret: string } & ProcessOpts,
): Promise<Child> {
  const child = spawnChild({
    name: opts.name,
    script: opts.script ?? "shell/worker/main.ts",
    env: {
      PROXY_URL: opts.serverUrl,
      WORKER_SECRET: opts.secret,
      WORKER_NAME: opts.name,
      BACKEND_URL: opts.backendUrl,
      MAX_CONCURRENT: String(opts.maxConcurrent ?? 4),
      ...opts.env,
    },
    unsetEnv: RELAY_ENV,
    ...processSpec(opts, PERMISSIONS.worker),
  });
  await awaitOrStop(
    child,
    child.waitForLine(/worker: registered /, READY_MS),
  );
  return child;
}

/**
 * A server, then `workers` in front of their backends (started at once),
 * each child pushed on `started` as it comes up so that stopInReverse or
 * withChildren stop them all whatever happens next; resolves once the server
 * counts every worker.
 */
export async function startRelayProcesses(
  started: Child[],
  opts: {
    secret: string;
    serverEnv?: Record<string, string>;
    workers: WorkerSpec[];
  },
): Promise<{ server: Running; workers: Child[] }> {
  const server = await startServerProcess({
    secret: opts.secret,
    env: opts.serverEnv ?? {},
  });
  started.push(server.child);
  const results = await Promise.allSettled(
    opts.workers.map(async (w) => {
      const child = await startWorkerProcess({
        ...w,
        serverUrl: server.url,
        secret: opts.secret,
      });
      started.push(child);
      return child;
    }),
  );
  const workers = results.map((r) => {
    if (r.status === "rejected") throw r.reason;
    return r.value;
  });
  await waitUntil(
    "every worker registered at the server",
    async () => (await workersConnected(server.url)) === workers.length,
  );
  return { server, workers };
}

/** A child that never got ready is stopped before the error goes up. */
async function awaitOrStop<T>(child: Child, ready: Promise<T>): Promise<T> {
  try {
    return await ready;
  } catch (e) {
    await child.stop(2_000);
    throw e;
  }
}
