// Real processes for the e2e harness: the mock backend, the relay server and its
// workers, started the one way the demo and the tests start them
// (shell/demo/cluster.ts), with what a benchmark adds: a profile, another
// checkout, the permissions of `deno task server` and `deno task worker`. Only
// the last lines of output are kept (a long run logs a lot) and shown when
// something fails. The naive relay and the stamp backend are the benchmark's
// own programs.
import {
  type Child,
  freePort,
  spawnProgram,
  waitUntil,
} from "../../shell/procs.ts";
import {
  startMockProcess,
  startServerProcess,
  startWorkerProcess,
} from "../../shell/demo/cluster.ts";

export { freePort };
export const SECRET = "bench-secret";

export type Proc = Child;

const TAIL_LINES = 40;

/** `deno <args>` by default; `program` for anything else (nginx). */
export function spawn(
  name: string,
  args: string[],
  env: Record<string, string> = {},
  program: string = Deno.execPath(),
): Proc {
  return spawnProgram({
    name,
    program,
    args,
    env,
    linesKept: TAIL_LINES,
  });
}

/**
 * Reads a /proc file. Deno asks for --allow-all to read /proc/<pid>/*
 * directly, so `cat` (already covered by --allow-run) reads it.
 */
export function readProc(path: string): string {
  const out = new Deno.Command("cat", { args: [path], stderr: "null" })
    .outputSync();
  if (!out.success) throw new Error(`cannot read ${path}`);
  return new TextDecoder().decode(out.stdout);
}

/**
 * Reads several /proc files with one `cat` (one spawn per CPU snapshot, not
 * one per process) and returns whatever could be read: a file of a process
 * that has exited is missing from the output, and the caller notices.
 */
export function readProcs(paths: readonly string[]): string {
  const out = new Deno.Command("cat", { args: [...paths], stderr: "null" })
    .outputSync();
  return new TextDecoder().decode(out.stdout);
}

/** Resident set size of a process in KiB (Linux /proc/<pid>/status VmRSS). */
export function rssKiB(pid: number): number {
  const status = readProc(`/proc/${pid}/status`);
  const m = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status);
  if (m === null) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]);
}

export async function getJson(url: string): Promise<unknown> {
  const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${url} answered ${res.status}: ${text}`);
  return JSON.parse(text);
}

export async function startMock(): Promise<{ proc: Proc; url: string }> {
  const mock = await startMockProcess({ delayMs: 0, linesKept: TAIL_LINES });
  return { proc: mock.child, url: mock.url };
}

/** Waits until a backend process answers GET /v1/models. */
async function backendUp(
  name: string,
  proc: Proc,
  url: string,
): Promise<{ proc: Proc; url: string }> {
  await waitUntil(
    name,
    async () => {
      await getJson(`${url}/v1/models`);
      return true;
    },
    30_000,
    proc,
  );
  return { proc, url };
}

export async function startStampBackend(): Promise<
  { proc: Proc; url: string }
> {
  const port = freePort();
  const proc = spawn("stamp-backend", [
    "run",
    "--allow-net=127.0.0.1",
    "bench/e2e/stamp_backend.ts",
    String(port),
  ]);
  const url = `http://127.0.0.1:${port}`;
  return await backendUp("the stamp backend", proc, url);
}

/** `--config` of another checkout, so its own import map and lock file apply. */
function checkoutConfig(checkout: string | undefined): string[] {
  return checkout === undefined ? [] : ["--config", `${checkout}/deno.json`];
}

export type Relay = {
  proc: Proc;
  url: string;
  port: number;
  workersConnected(): Promise<number>;
};

/** --cpu-prof into `dir`/`name`, when a profile is asked for. */
function profile(dir: string | undefined, name: string): string[] {
  return dir === undefined
    ? []
    : ["--cpu-prof", `--cpu-prof-dir=${dir}/${name}`];
}

export async function startRelayServer(
  opts: {
    cpuProfDir?: string;
    env?: Record<string, string>;
    /** Another server entry (bench:ci's mutant, bench/e2e/mutant_server.ts). */
    entry?: string;
    /** Another checkout's shell/server/main.ts, with its own deno.json (--baseline). */
    checkout?: string;
    /** Log prefix (default "server"). */
    name?: string;
  } = {},
): Promise<Relay> {
  const { child: proc, url } = await startServerProcess({
    name: opts.name ?? "server",
    secret: SECRET,
    script: opts.checkout === undefined
      ? opts.entry ?? "shell/server/main.ts"
      : `${opts.checkout}/shell/server/main.ts`,
    denoFlags: [
      ...profile(opts.cpuProfDir, "server"),
      ...checkoutConfig(opts.checkout),
    ],
    // The same permissions as `deno task server`.
    permissions: [
      "--allow-net",
      "--allow-env",
      "--allow-read",
      "--allow-write",
    ],
    linesKept: TAIL_LINES,
    env: { MAX_QUEUE_LEN: "20000", DRAIN_TIMEOUT_SECS: "2", ...opts.env },
  });
  // Read the body whatever the status (/health is 503 while shutting down).
  const workersConnected = async () => {
    const res = await fetch(`${url}/health`, {
      signal: AbortSignal.timeout(5000),
    });
    const body = await res.json() as { workers_connected?: unknown };
    if (typeof body.workers_connected !== "number") {
      throw new Error(
        `/health has no workers_connected: ${JSON.stringify(body)}`,
      );
    }
    return body.workers_connected;
  };
  return { proc, url, port: Number(new URL(url).port), workersConnected };
}

/**
 * Starts a worker daemon and waits until the server counts `expectWorkers`
 * registered workers. `models` null: the worker discovers them from the backend.
 */
export async function startWorker(
  relay: Relay,
  backendUrl: string,
  opts: {
    name: string;
    models: string[] | null;
    maxConcurrent: number;
    expectWorkers: number;
    cpuProfDir?: string;
    /** Another checkout's shell/worker/main.ts (--baseline). */
    checkout?: string;
  },
): Promise<Proc> {
  const proc = await startWorkerProcess({
    name: opts.name,
    serverUrl: relay.url,
    secret: SECRET,
    backendUrl,
    maxConcurrent: opts.maxConcurrent,
    env: {
      MODELS_REFRESH_SECS: "0",
      ...(opts.models === null ? {} : { MODELS: opts.models.join(",") }),
    },
    script: opts.checkout === undefined
      ? "shell/worker/main.ts"
      : `${opts.checkout}/shell/worker/main.ts`,
    denoFlags: [
      ...profile(opts.cpuProfDir, opts.name),
      ...checkoutConfig(opts.checkout),
    ],
    // The same permissions as `deno task worker` (a real backend may be on
    // another host).
    permissions: ["--allow-net", "--allow-env", "--allow-sys=hostname"],
    linesKept: TAIL_LINES,
  });
  await waitUntil(
    `worker ${opts.name} to register`,
    async () => (await relay.workersConnected()) >= opts.expectWorkers,
    30_000,
    proc,
  );
  return proc;
}

/**
 * The naive relay of issue 31 (bench/naive/relay.ts): its server and one
 * worker in front of `backendUrl`, up once the server counts the worker.
 */
export async function startNaiveRelay(
  backendUrl: string,
): Promise<{ server: Proc; worker: Proc; url: string }> {
  const port = freePort();
  const url = `http://127.0.0.1:${port}`;
  const server = spawn("naive-server", [
    "run",
    "--allow-net=127.0.0.1",
    "bench/naive/relay.ts",
    "server",
    String(port),
  ]);
  const worker = spawn("naive-worker", [
    "run",
    // A real backend may be on another host.
    "--allow-net",
    "bench/naive/relay.ts",
    "worker",
    url,
    backendUrl,
  ]);
  await waitUntil(
    "the naive relay",
    async () => {
      const body = await getJson(`${url}/health`) as {
        workers_connected?: number;
      };
      return body.workers_connected === 1;
    },
    30_000,
    server,
  );
  return { server, worker, url };
}

/**
 * The floor of issue 31 (bench/floor/relay.ts): a byte tunnel of two Deno
 * processes in front of `backendUrl`, up once its worker has connected.
 */
export async function startFloorRelay(
  backendUrl: string,
): Promise<{ server: Proc; worker: Proc; url: string }> {
  const port = freePort();
  const linkPort = freePort();
  const server = spawn("floor-server", [
    "run",
    "--allow-net=127.0.0.1",
    "bench/floor/relay.ts",
    "server",
    String(port),
    String(linkPort),
  ]);
  await server.waitForLine(/floor server listening/, 30_000);
  const worker = spawn("floor-worker", [
    "run",
    // A real backend may be on another host.
    "--allow-net",
    "bench/floor/relay.ts",
    "worker",
    String(linkPort),
    new URL(backendUrl).host,
  ]);
  await worker.waitForLine(/floor worker connected/, 30_000);
  return { server, worker, url: `http://127.0.0.1:${port}` };
}
