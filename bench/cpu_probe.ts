// CPU per request of each relay process (issue 18): the mock, a relay server and
// one worker, then rounds of load; per round the CPU time (utime + stime from
// /proc/<pid>/stat) each process spent, divided by the requests of the round.
// Steadier than requests/s on a shared machine: a slow hour stretches the wall
// clock of every process, not the CPU a request costs. bench/README.md, "Per-
// request cost (issue 18)", has figures and how they were taken.
//
//   deno run --allow-run --allow-net --allow-read --allow-env bench/cpu_probe.ts \
//     [--mode d|g|h] [--rounds 5] [--requests 8000] [--root <checkout>] [--cpu-prof <dir>]
//
// --mode d: non-streaming at concurrency 32 (scenario d); g: one client,
// sequential non-streaming (g); h: one client, sequential 16-chunk streams (h).
// g and h also time the same requests sent direct to the mock, for the added
// p50. --root runs another checkout's server and worker (an A/B against a
// `git worktree` of the base), with this file's load generator on both sides.
import http from "node:http";
import { parseArgs } from "node:util";
import { postChat } from "./_post_chat.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    mode: { type: "string", default: "d" },
    rounds: { type: "string", default: "5" },
    requests: { type: "string", default: "8000" },
    root: { type: "string", default: new URL("..", import.meta.url).pathname },
    "cpu-prof": { type: "string" },
  },
  strict: true,
});
const mode = values.mode;
if (mode !== "d" && mode !== "g" && mode !== "h") {
  throw new Error("--mode is d, g or h");
}
const rounds = Number(values.rounds);
const requests = Number(values.requests);
const concurrency = mode === "d" ? 32 : 1;
/** Dropped from every figure: the JIT and the connection pools warm up. */
const WARM_UP_REQUESTS = 3000;

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

function spawn(args: string[], env: Record<string, string> = {}) {
  return new Deno.Command(Deno.execPath(), {
    args,
    env,
    cwd: values.root,
    stdout: "null",
    stderr: "null",
  }).spawn();
}

function profFlags(name: string): string[] {
  const dir = values["cpu-prof"];
  return dir === undefined
    ? []
    : ["--cpu-prof", `--cpu-prof-dir=${dir}/${name}`];
}

async function waitFor(what: string, ok: () => Promise<boolean>) {
  for (let i = 0; i < 300; i++) {
    try {
      if (await ok()) return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} did not come up`);
}

/** CPU time of a process in µs (clock ticks are 10 ms on Linux). */
function cpuUs(pid: number): number {
  // `cat`: Deno wants --allow-all to read /proc/<pid>/* itself.
  const out = new Deno.Command("cat", { args: [`/proc/${pid}/stat`] })
    .outputSync();
  const stat = new TextDecoder().decode(out.stdout);
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) * 10_000;
}

const mockPort = freePort();
const serverPort = freePort();
const secret = "cpu-probe-secret";
const mock = spawn([
  "run",
  "--allow-net=127.0.0.1,localhost",
  "mock/main.ts",
  "--port",
  String(mockPort),
  "--delay-ms",
  "0",
]);
const server = spawn([
  "run",
  ...profFlags("server"),
  "--allow-net",
  "--allow-env",
  "--allow-read",
  "--allow-write",
  "shell/server/main.ts",
], {
  WORKER_SECRET: secret,
  LISTEN_ADDR: `127.0.0.1:${serverPort}`,
  MAX_QUEUE_LEN: "20000",
  DRAIN_TIMEOUT_SECS: "2",
});
const health = async () =>
  await (await fetch(`http://127.0.0.1:${serverPort}/health`)).json();
await waitFor("the server", async () => (await health()) !== null);
await waitFor("the mock", async () => {
  await (await fetch(`http://127.0.0.1:${mockPort}/v1/models`)).text();
  return true;
});
const worker = spawn([
  "run",
  ...profFlags("worker"),
  "--allow-net",
  "--allow-env",
  "--allow-sys=hostname",
  "shell/worker/main.ts",
], {
  WORKER_SECRET: secret,
  PROXY_URL: `http://127.0.0.1:${serverPort}`,
  BACKEND_URL: `http://127.0.0.1:${mockPort}`,
  WORKER_NAME: "cpu-probe",
  MAX_CONCURRENT: "1000",
  MODELS_REFRESH_SECS: "0",
  MODELS: "mock-model",
});
await waitFor(
  "the worker",
  async () => (await health()).workers_connected === 1,
);

const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
const body = JSON.stringify({
  model: "mock-model",
  messages: [{ role: "user", content: "hi" }],
  stream: mode === "h",
  max_tokens: 16,
});

/** One request to `port`; resolves with its latency in ms once the answer ended. */
function once(port: number): Promise<number> {
  const t0 = performance.now();
  return postChat(port, agent, body, (res, resolve, reject) => {
    res.resume();
    res.on(
      "end",
      () =>
        res.statusCode === 200
          ? resolve(performance.now() - t0)
          : reject(new Error(`answered ${res.statusCode}`)),
    );
  });
}

/** `count` requests, `concurrency` at a time; latencies sorted. */
async function load(port: number, count: number): Promise<number[]> {
  const latencies: number[] = [];
  let started = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (started < count) {
        started++;
        latencies.push(await once(port));
      }
    }),
  );
  return latencies.sort((a, b) => a - b);
}

const p50 = (sorted: number[]) => sorted[Math.floor(sorted.length / 2)]!;
const median = (xs: number[]) => p50([...xs].sort((a, b) => a - b));

const pids = { server: server.pid, worker: worker.pid, mock: mock.pid };
type Round = Record<string, number>;
const results: Round[] = [];
try {
  await load(serverPort, WARM_UP_REQUESTS);
  if (mode !== "d") await load(mockPort, WARM_UP_REQUESTS);
  for (let r = 0; r < rounds; r++) {
    const before = Object.values(pids).map(cpuUs);
    const t0 = performance.now();
    const relay = await load(serverPort, requests);
    const wallMs = performance.now() - t0;
    const after = Object.values(pids).map(cpuUs);
    const round: Round = {};
    Object.keys(pids).forEach((name, i) => {
      round[`${name}CpuUs`] = +((after[i]! - before[i]!) / requests).toFixed(1);
    });
    round.relayReqPerS = Math.round(requests / wallMs * 1000);
    round.relayP50Ms = +p50(relay).toFixed(3);
    if (mode !== "d") {
      const direct = await load(mockPort, requests);
      round.addedP50Ms = +(p50(relay) - p50(direct)).toFixed(3);
    }
    results.push(round);
    console.log(JSON.stringify({ mode, round: r, ...round }));
  }
  const summary: Round = {};
  for (const k of Object.keys(results[0] ?? {})) {
    summary[k] = +median(results.map((r) => r[k]!)).toFixed(3);
  }
  console.log(JSON.stringify({ mode, median: summary }));
} finally {
  agent.destroy();
  for (const p of [worker, server, mock]) {
    try {
      p.kill("SIGTERM");
    } catch {
      // already gone
    }
  }
  await Promise.all([worker.status, server.status, mock.status]);
}
