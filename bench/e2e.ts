// `deno task bench:e2e`: what the relay costs, measured on real processes on
// loopback against a direct connection to the same backend and against nginx in
// front of it, in the same interleaved run (issue 10, scenarios a-g; issue 18:
// h, the nginx path, CPU per unit of every process). See bench/README.md for the
// figures and how to point it at a real backend (BACKEND_URL=http://… deno task
// bench:e2e).
import { parseArgs } from "node:util";
import { loadAvg, machineFacts } from "./e2e/machine.ts";
import { ROOT } from "../shell/procs.ts";
import {
  cpuTable,
  nginxLine,
  type Report,
  table,
  writeJson,
} from "./e2e/report.ts";
import {
  type Ctx,
  scenarioA,
  scenarioB,
  scenarioC,
  scenarioD,
  scenarioE,
  scenarioF,
  scenarioG,
  scenarioH,
  scenarioI,
  scenarioK,
  scenarioL,
  type ScenarioResult,
} from "./e2e/scenarios.ts";
import { type NginxStatus, setUp } from "./e2e/setup.ts";
import { baselineCheckout, DEFAULT_BASELINE } from "./e2e/baseline.ts";

const HELP = `deno task bench:e2e [options]

  --only <list>     scenarios to run, e.g. a,b,g,h (default: all; f is skipped
                    against a real backend)
  --rounds <n>      measured rounds per scenario and path (default 5, 3 for
                    c/d/g/h/i/j/k; i is embeddings, batches of 64 inputs; j is
                    plain requests at c=8 for CPU per request, k the best
                    throughput whose p99 stays within 20 ms, issue 31; l is
                    j's load on ours, base and naive at once, 5 rounds: their
                    CPU per request paired against the same load spikes)
  --no-nginx        no nginx path (by default nginx-light fronts the same
                    backend; installed with apt-get when missing and root)
  --no-naive        no naive-relay path (issue 31: bench/naive/relay.ts, a
                    two-hop relay of Deno's native parts, runs beside the
                    others by default)
  --baseline <commit>  issue 31: that commit's server and worker run as the
                    path "base" in the timed scenarios (default
                    ${DEFAULT_BASELINE}; exported with git archive into a /tmp
                    directory removed at the end; skipped, with the reason,
                    when git cannot give it)
  --no-base         no baseline path
  --c-streams <n>   concurrent streams in scenario (c) (default 256)
  --cpu-prof <dir>  run the relay server with --cpu-prof into <dir>
  --out <dir>       where the JSON goes (default bench/results)
  --cluster <n>     n relay instances on a private redis-server (issue 16):
                    clients call the first, workers attach to the last
  --ledger          issue 26: (d) and (g) twice in this run, on a relay whose
                    usage ledger is on (admin token, a database file under
                    --out) and on one whose ledger is off (USAGE_RETENTION_DAYS=0)

  BACKEND_URL=http://host:port   measure against a running llama-server,
                    Ollama or vLLM instead of the mock (smaller sizes)
  BENCH_MODEL=<id>  model to request (default: the first from /v1/models)
`;

const { values } = parseArgs({
  args: Deno.args,
  options: {
    only: { type: "string" },
    rounds: { type: "string" },
    "c-streams": { type: "string" },
    "cpu-prof": { type: "string" },
    cluster: { type: "string" },
    "no-nginx": { type: "boolean" },
    "no-naive": { type: "boolean" },
    baseline: { type: "string", default: DEFAULT_BASELINE },
    "no-base": { type: "boolean" },
    ledger: { type: "boolean" },
    out: { type: "string", default: `${ROOT}bench/results` },
    help: { type: "boolean" },
  },
  strict: true,
});
if (values.help === true) {
  console.log(HELP);
  Deno.exit(0);
}

// Fail before minutes of measuring, not after: `deno task bench:e2e` may write
// only under bench/results.
if (
  Deno.permissions.querySync({ name: "write", path: values.out }).state !==
    "granted"
) {
  console.error(
    `bench:e2e: no write permission for --out ${values.out} (the task grants --allow-write=bench/results); choose a directory under bench/results or run bench/e2e.ts with your own --allow-write`,
  );
  Deno.exit(2);
}

const backendUrl = Deno.env.get("BACKEND_URL") ?? null;
const real = backendUrl !== null;
const all = real ? "a,b,c,d,e,g,h,i,j,k,l" : "a,b,c,d,e,f,g,h,i,j,k,l";
const only = new Set((values.only ?? all).split(",").map((s) => s.trim()));
const roundsOverride = values.rounds === undefined
  ? null
  : Number(values.rounds);
const rounds = (n: number) => roundsOverride ?? n;

// Sizes: the mock is fast and free; a real model is neither.
const size = real
  ? {
    aChunks: 256,
    bStreams: 8,
    bChunks: 128,
    cStreams: 16,
    cChunks: 64,
    dRequests: 200,
    dConcurrency: 8,
    eWorkers: 1000,
    gRequests: 20,
    gTokens: 8,
    hRequests: 20,
    hChunks: 16,
    iRequests: 40,
    iConcurrency: 4,
    jRequests: 100,
    kRequests: 40,
    kP99Ms: 2000,
  }
  : {
    aChunks: 20_000,
    bStreams: 64,
    bChunks: 500,
    cStreams: 256,
    cChunks: 50,
    dRequests: 2000,
    dConcurrency: 32,
    eWorkers: 1000,
    // Sequential rounds long enough for a steady CPU figure per request.
    gRequests: 500,
    gTokens: 5,
    hRequests: 500,
    hChunks: 16,
    iRequests: 1000,
    iConcurrency: 16,
    // The gateway board's figures (issue 31): CPU per request at c=8, and the
    // best throughput whose p99 stays within a bound.
    jRequests: 1000,
    kRequests: 400,
    kP99Ms: 20,
  };

const log = (line: string) => console.error(line);
const started = performance.now();
const machine = machineFacts();
const loadBefore = loadAvg();
const results: ScenarioResult[] = [];
let failed = false;
let nginx: NginxStatus = {
  kind: "skipped",
  reason: values["no-nginx"] === true ? "--no-nginx" : "no timed scenario",
};

/** With --cluster: the private Redis, whose traffic per relayed chunk is printed (issue 23). */
let redisUrl: string | null = null;

/** Bytes Redis received and sent so far (INFO stats). */
async function redisBytes(url: string): Promise<number> {
  const out = await new Deno.Command("redis-cli", {
    args: ["-u", url, "INFO", "stats"],
    stdout: "piped",
    stderr: "null",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  const read = (k: string) =>
    Number(new RegExp(`${k}:(\\d+)`).exec(text)?.[1] ?? 0);
  return read("total_net_input_bytes") + read("total_net_output_bytes");
}

/**
 * Runs one throughput scenario; with --cluster, also prints Redis bytes per
 * chunk relayed (its warm-up round and measured rounds through the relay).
 */
async function withRedisBytes(
  id: string,
  relayedChunks: number,
  run: () => Promise<ScenarioResult>,
): Promise<ScenarioResult> {
  const url = redisUrl;
  const before = url === null ? 0 : await redisBytes(url);
  const result = await run();
  if (url !== null) {
    const bytes = await redisBytes(url) - before;
    log(
      `  (${id}) Redis traffic: ${bytes} bytes for ${relayedChunks} relayed chunks = ${
        (bytes / relayedChunks).toFixed(2)
      } bytes per chunk`,
    );
  }
  return result;
}

// Issue 31: the baseline's checkout, made before minutes of measuring. Like
// nginx, a baseline that cannot be had (no git, a shallow clone without the
// commit) is skipped with the reason, not a failed run.
async function baselineOrSkip(): Promise<
  Awaited<ReturnType<typeof baselineCheckout>> | null
> {
  if (values["no-base"] === true) return null;
  try {
    const b = await baselineCheckout(values.baseline, log);
    log(`baseline path: ${b.commit} (one instance, also with --cluster)`);
    return b;
  } catch (e) {
    log(
      `baseline path skipped: ${e instanceof Error ? e.message.trim() : e}`,
    );
    return null;
  }
}

/** One fresh relay stack per phase; a failure is reported with the server's output. */
async function phase(
  withStamp: boolean,
  withNginx: boolean,
  run: (c: Ctx) => Promise<void>,
  serverEnv: Record<string, string> = {},
  withNaive = false,
  withBase = false,
): Promise<void> {
  const setup = await setUp({
    backendUrl,
    model: Deno.env.get("BENCH_MODEL") ?? null,
    rounds: 5,
    withStamp,
    nginx: withNginx,
    naive: withNaive,
    ...(withBase && baseline !== null ? { baseline: baseline.dir } : {}),
    workerMaxConcurrent: 256,
    serverEnv,
    ...(values.cluster === undefined
      ? {}
      : { cluster: Number(values.cluster) }),
    ...(values["cpu-prof"] === undefined
      ? {}
      : { cpuProfDir: values["cpu-prof"] }),
    log,
  });
  if (withNginx) nginx = setup.nginx;
  redisUrl = setup.redisUrl;
  try {
    await run(setup.ctx);
  } catch (e) {
    failed = true;
    console.error(`bench:e2e failed: ${e instanceof Error ? e.stack : e}`);
    console.error(
      `--- server output ---\n${setup.ctx.relayServer.proc.tail()}`,
    );
  } finally {
    await setup.teardown();
  }
}

/** `c` with `n` measured rounds (or --rounds). */
const withRounds = (c: Ctx, n: number): Ctx => ({ ...c, rounds: rounds(n) });

/** The timed scenarios, in the order they run, each on a phase's context. */
const TIMED: Record<string, (c: Ctx) => Promise<ScenarioResult>> = {
  a: (c) =>
    withRedisBytes(
      "a",
      (rounds(5) + 1) * size.aChunks,
      () => scenarioA(withRounds(c, 5), size.aChunks),
    ),
  b: (c) =>
    withRedisBytes(
      "b",
      (rounds(5) + 1) * size.bStreams * size.bChunks,
      () => scenarioB(withRounds(c, 5), size.bStreams, size.bChunks),
    ),
  c: (c) =>
    scenarioC(
      withRounds(c, 3),
      values["c-streams"] === undefined
        ? size.cStreams
        : Number(values["c-streams"]),
      size.cChunks,
      20,
    ),
  d: (c) => scenarioD(withRounds(c, 3), size.dRequests, size.dConcurrency, 5),
  g: (c) => scenarioG(withRounds(c, 3), size.gRequests, size.gTokens),
  h: (c) => scenarioH(withRounds(c, 3), size.hRequests, size.hChunks),
  i: (c) => scenarioI(withRounds(c, 3), size.iRequests, size.iConcurrency, 64),
  j: (c) => scenarioD(withRounds(c, 3), size.jRequests, 8, 5, "j"),
  k: (c) => scenarioK(withRounds(c, 3), size.kRequests, size.kP99Ms),
  l: (c) => scenarioL(withRounds(c, 5), size.jRequests, 8),
};

// Throughput and latency first; memory (e, f) on a fresh server so that the
// garbage of earlier scenarios does not move its RSS baseline.
const timed = Object.keys(TIMED).some((s) => only.has(s));
const baseline = timed ? await baselineOrSkip() : null;
if (timed) {
  await phase(
    only.has("c"),
    values["no-nginx"] !== true,
    async (c) => {
      for (const [id, run] of Object.entries(TIMED)) {
        if (only.has(id)) results.push(await run(c));
      }
    },
    {},
    values["no-naive"] !== true,
    true,
  );
}
if (only.has("e") || (only.has("f") && !real)) {
  await phase(false, false, async (c) => {
    if (only.has("e")) results.push(await scenarioE(c, size.eWorkers));
    if (only.has("f") && !real) results.push(await scenarioF(c, 5000, 1000));
  });
}

// Issue 26: the usage ledger's cost, on and off in one run, on otherwise equal
// relays (both with an admin token, so both open the database file), in the
// order on, off, off, on so that a load drifting over the run weighs on both.
if (values.ledger === true) {
  await Deno.mkdir(values.out, { recursive: true });
  for (const [i, on] of [true, false, false, true].entries()) {
    const db = `${values.out}/ledger-${Deno.pid}-${i}.db`;
    await phase(false, false, async (c) => {
      const tag = `${on ? " ledger on" : " ledger off"} #${i < 2 ? 1 : 2}`;
      const d = await TIMED.d!(c);
      const g = await TIMED.g!(c);
      results.push({ ...d, id: d.id + tag }, { ...g, id: g.id + tag });
    }, {
      MODELRELAY_ADMIN_TOKEN: "bench-ledger",
      MODELRELAY_DB_PATH: db,
      USAGE_RETENTION_DAYS: on ? "30" : "0",
    });
    for (const f of [db, `${db}-journal`, `${db}-wal`, `${db}-shm`]) {
      await Deno.remove(f).catch(() => {});
    }
  }
}

results.sort((x, y) => x.id.localeCompare(y.id));
const report: Report = {
  command: `deno task bench:e2e${
    Deno.args.length > 0 ? " " + Deno.args.join(" ") : ""
  }`,
  mode: real ? "real backend" : "mock backend",
  backend: backendUrl ?? "mock/main.ts --delay-ms 0",
  machine,
  loadavg: { before: loadBefore, after: loadAvg() },
  nginx,
  durationSecs: Math.round((performance.now() - started) / 1000),
  scenarios: results,
};
console.log(
  `\n${machine.date}  ${machine.cpuModel}, ${machine.cores} cores, ${machine.memoryGiB} GiB, Deno ${machine.deno}, ${report.mode}`,
);
console.log(
  `load average before ${report.loadavg.before}, after ${report.loadavg.after}`,
);
console.log(nginxLine(nginx));
console.log(`\n${table(results)}`);
const cpu = cpuTable(results);
if (cpu !== "") {
  console.log(
    "\nCPU µs per chunk (a, b, c) or request (d, g, h, i) of each process, summed over\nall measured rounds of each path; loadgen is this process (shared by all paths).\n",
  );
  console.log(cpu);
}
await baseline?.remove();
const path = await writeJson(report, values.out);
console.log(`\nJSON: ${path} (${report.durationSecs} s)`);
Deno.exit(failed ? 1 : 0);
