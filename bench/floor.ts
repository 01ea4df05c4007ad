// Issue 31's floor: how far "CPU per plain request at most half of 9ef0db5's"
// is from the least any two-process relay on Deno can spend. Four relays serve
// the same load at the same time (as bench:e2e's scenario (l): every load
// spike of a shared machine falls on all of them alike): ours, the baseline
// commit, the naive relay of Deno's parts (bench/naive/relay.ts) and the floor
// (bench/floor/relay.ts, a byte tunnel that parses nothing). Each relay's
// server + worker CPU per request is read from /proc; the mock backend and the
// load generator are shared and left out.
//
//   deno task bench:floor [--rounds 5] [--requests 1000] [--concurrency 8]
//                         [--baseline 9ef0db5] [--no-base] [--no-naive]
//                         [--sequential 500]
//
// --sequential N measures latency instead (bench:e2e's (g)): each round sends
// N sequential plain requests on one connection to each path in turn, direct
// to the mock included (rotated, so no path always goes first), and the
// figure is each relay's added p50 over direct's in the same round.
//
// Read "above the floor": what a relay spends beyond the tunnel, ours against
// the baseline's. Halving the whole figure needs the floor plus at most half
// the baseline's figure minus the floor.
//
// The last two columns split each relay's figure into user and kernel time,
// by their shares of /proc/<pid>/stat's ticks over all rounds: the kernel's
// part (the sockets' syscalls, loopback delivery included) is what no relay's
// own code changes, so it shows how much of a figure is left to cut.
import { parseArgs } from "node:util";
import { newAgent, pool, postOnce, type Target } from "./e2e/client.ts";
import { readCpuNs, readTicks, type Ticks } from "./e2e/cpu.ts";
import { baselineCheckout, DEFAULT_BASELINE } from "./e2e/baseline.ts";
import {
  type Proc,
  startFloorRelay,
  startMock,
  startNaiveRelay,
  startRelayServer,
  startWorker,
} from "./e2e/procs.ts";
import { median, percentile, round } from "./e2e/stats.ts";
import { stopInReverse } from "../shell/procs.ts";

const HELP = `usage: deno task bench:floor [options]
  --rounds <n>       measured rounds (default 5)
  --requests <n>     plain requests per relay per round (default 1000)
  --concurrency <n>  requests in flight per relay (default 8)
  --baseline <rev>   the commit to compare with (default ${DEFAULT_BASELINE})
  --no-base          leave the baseline out
  --no-naive         leave the naive relay out
  --sequential <n>   added latency at concurrency 1 instead: n sequential
                     requests per path per round, paths in turn
`;

type Path = { name: string; target: Target; pids: number[] };

const MODEL = "mock-model";

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      rounds: { type: "string", default: "5" },
      requests: { type: "string", default: "1000" },
      concurrency: { type: "string", default: "8" },
      baseline: { type: "string", default: DEFAULT_BASELINE },
      "no-base": { type: "boolean" },
      "no-naive": { type: "boolean" },
      sequential: { type: "string" },
      help: { type: "boolean" },
    },
  });
  if (values.help === true) {
    console.log(HELP);
    return 0;
  }
  const rounds = positive(values.rounds, "--rounds");
  const requests = positive(values.requests, "--requests");
  const concurrency = positive(values.concurrency, "--concurrency");
  const log = (line: string) => console.error(line);
  const procs: Proc[] = [];
  // As in bench:e2e, a baseline git cannot give (no repository, a shallow
  // clone) leaves its path out and says why; the rest still measures.
  const base = values["no-base"] === true
    ? null
    : await baselineCheckout(values.baseline, log).catch((e) => {
      log(`baseline path skipped: ${e instanceof Error ? e.message : e}`);
      return null;
    });
  try {
    const mock = await startMock();
    procs.push(mock.proc);
    const paths: Path[] = [];
    const relay = async (name: string, checkout?: string) => {
      const server = await startRelayServer({
        name: `${name}-server`,
        ...(checkout === undefined ? {} : { checkout }),
      });
      procs.push(server.proc);
      const worker = await startWorker(server, mock.url, {
        name: `${name}-worker`,
        models: [MODEL],
        maxConcurrent: 64,
        expectWorkers: 1,
        ...(checkout === undefined ? {} : { checkout }),
      });
      procs.push(worker);
      paths.push(path(name, server.url, [server.proc.pid, worker.pid]));
    };
    await relay("ours");
    if (base !== null) await relay("base", base.dir);
    if (values["no-naive"] !== true) {
      const n = await startNaiveRelay(mock.url);
      procs.push(n.server, n.worker);
      paths.push(path("naive", n.url, [n.server.pid, n.worker.pid]));
    }
    const f = await startFloorRelay(mock.url);
    procs.push(f.server, f.worker);
    paths.push(path("floor", f.url, [f.server.pid, f.worker.pid]));

    const agent = newAgent();
    if (values.sequential !== undefined) {
      const n = positive(values.sequential, "--sequential");
      const direct = path("direct", mock.url, []);
      const { added, cpu } = await sequentialRounds(
        [direct, ...paths],
        rounds,
        n,
        agent,
        log,
      );
      agent.destroy();
      console.log(
        latencyReport(added, cpu, base?.commit ?? null, rounds, n),
      );
      return 0;
    }
    const runAll = () =>
      Promise.all(
        paths.map((p) =>
          pool(requests, concurrency, 120_000, () =>
            postOnce(p.target, {
              model: MODEL,
              maxTokens: 5,
              checker: "mock",
              agent,
              timeoutMs: 30_000,
            }))
        ),
      );
    log(
      `${requests} plain requests at concurrency ${concurrency} on ${
        paths.map((p) => p.name).join(", ")
      } at once; a warm-up round, then ${rounds}`,
    );
    await runAll();
    const perRequest = new Map<string, number[]>(
      paths.map((p) => [p.name, []]),
    );
    const ticks = new Map<string, Ticks>(
      paths.map((p) => [p.name, { user: 0, kernel: 0 }]),
    );
    for (let r = 0; r < rounds; r++) {
      const before = usageOf(paths);
      const done = await runAll();
      const after = usageOf(paths);
      paths.forEach((p, i) => {
        const a = after[i]!;
        const b = before[i]!;
        perRequest.get(p.name)!.push((a.ns - b.ns) / 1000 / done[i]!.length);
        const t = ticks.get(p.name)!;
        t.user += a.ticks.user - b.ticks.user;
        t.kernel += a.ticks.kernel - b.ticks.kernel;
      });
      log(
        `round ${r + 1}: ${
          paths.map((p) =>
            `${p.name} ${round(perRequest.get(p.name)!.at(-1)!, 1)} µs`
          ).join(", ")
        }`,
      );
    }
    agent.destroy();
    console.log(report(perRequest, ticks, base?.commit ?? null, rounds));
    return 0;
  } finally {
    await stopInReverse(procs, 3000);
    await base?.remove();
  }
}

/** One checked plain request of the bench's model, 5 tokens. */
function plain(p: Path, agent: ReturnType<typeof newAgent>) {
  return postOnce(p.target, {
    model: MODEL,
    maxTokens: 5,
    checker: "mock",
    agent,
    timeoutMs: 30_000,
  });
}

/**
 * `rounds` rounds of `n` sequential requests on each path (the first is
 * direct), rotated by the round; returns each relay's added p50 per round,
 * ms, and its server + worker CPU per request in that round, µs.
 */
async function sequentialRounds(
  all: readonly Path[],
  rounds: number,
  n: number,
  agent: ReturnType<typeof newAgent>,
  log: (line: string) => void,
): Promise<{ added: Map<string, number[]>; cpu: Map<string, number[]> }> {
  const cpu = new Map<string, number[]>(all.slice(1).map((p) => [p.name, []]));
  const p50 = async (p: Path) => {
    const ms: number[] = [];
    const before = usageOf([p])[0]!.ns;
    for (let i = 0; i < n; i++) ms.push((await plain(p, agent)).totalMs);
    cpu.get(p.name)?.push((usageOf([p])[0]!.ns - before) / 1000 / n);
    return percentile(ms, 50);
  };
  for (const p of all) await p50(p); // warm-up
  for (const v of cpu.values()) v.length = 0;
  const added = new Map<string, number[]>(
    all.slice(1).map((p) => [p.name, []]),
  );
  for (let r = 0; r < rounds; r++) {
    const got = new Map<string, number>();
    for (let k = 0; k < all.length; k++) {
      const p = all[(k + r) % all.length]!;
      got.set(p.name, await p50(p));
    }
    const direct = got.get("direct")!;
    for (const [name, v] of added) v.push(got.get(name)! - direct);
    log(
      `round ${r + 1}: direct p50 ${round(direct)} ms; added ${
        [...added].map(([name, v]) => `${name} +${round(v.at(-1)!)}`).join(
          ", ",
        )
      } ms`,
    );
  }
  return { added, cpu };
}

/** The markdown table of added p50 and CPU per request at concurrency 1. */
function latencyReport(
  added: Map<string, number[]>,
  cpu: Map<string, number[]>,
  baseCommit: string | null,
  rounds: number,
  n: number,
): string {
  const baseRounds = added.get("base");
  const floor = added.get("floor")!;
  const lines = [
    `| relay | added p50 over direct, ms (median of ${rounds} rounds of ${n}) | / base's | above the floor's, ms | server + worker µs per request at c=1 |`,
    "| --- | ---: | ---: | ---: | ---: |",
  ];
  for (const [name, v] of added) {
    const ratio = baseRounds === undefined
      ? "n/a"
      : String(round(median(v) / median(baseRounds)));
    lines.push(
      `| ${name === "base" ? `base (${baseCommit})` : name} | ${
        round(median(v))
      } | ${ratio} | ${round(median(v) - median(floor))} | ${
        round(median(cpu.get(name)!), 1)
      } |`,
    );
  }
  return lines.join("\n");
}

function path(name: string, url: string, pids: number[]): Path {
  const u = new URL(url);
  return {
    name,
    // The client's Target names only the four bench:e2e paths; its name is
    // used in error messages, so the nearest one is given.
    target: {
      name: name === "ours"
        ? "relay"
        : name === "base" || name === "direct"
        ? name
        : "naive",
      host: u.hostname,
      port: Number(u.port),
    },
    pids,
  };
}

/** What a path's processes have used so far: CPU ns, and user and kernel ticks. */
type Usage = { ns: number; ticks: Ticks };

/** Each path's server + worker usage, in `paths`' order. */
function usageOf(paths: readonly Path[]): Usage[] {
  const pids = paths.flatMap((p) => p.pids);
  const ns = readCpuNs(pids);
  const ticks = readTicks(pids);
  return paths.map((p) =>
    p.pids.reduce((sum, pid) => {
      const n = ns.get(pid);
      const t = ticks.get(pid);
      if (n === undefined || t === undefined) {
        throw new Error(`${p.name}: process ${pid} gone`);
      }
      return {
        ns: sum.ns + n,
        ticks: {
          user: sum.ticks.user + t.user,
          kernel: sum.ticks.kernel + t.kernel,
        },
      };
    }, { ns: 0, ticks: { user: 0, kernel: 0 } })
  );
}

/**
 * The markdown table: µs per request, per-round ratios to base, and the median
 * split into user and kernel time by the share of each in all rounds' ticks.
 */
function report(
  perRequest: Map<string, number[]>,
  ticks: Map<string, Ticks>,
  baseCommit: string | null,
  rounds: number,
): string {
  const med = (name: string) => {
    const v = perRequest.get(name);
    return v === undefined ? null : median(v);
  };
  const floor = perRequest.get("floor")!;
  const baseRounds = perRequest.get("base");
  const perRound = (f: (i: number) => number) =>
    round(median(Array.from({ length: rounds }, (_, i) => f(i))));
  const lines = [
    `| relay | server + worker µs per request (median of ${rounds}) | / base (median of rounds) | above the floor, µs | above the floor / base's | the whole in user space, µs | the whole in the kernel, µs |`,
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const [name, v] of perRequest) {
    const ratio = baseRounds === undefined
      ? "n/a"
      : String(perRound((i) => v[i]! / baseRounds[i]!));
    const above = perRound((i) => v[i]! - floor[i]!);
    const aboveRatio = baseRounds === undefined ? "n/a" : String(
      perRound((i) => (v[i]! - floor[i]!) / (baseRounds[i]! - floor[i]!)),
    );
    const t = ticks.get(name)!;
    const kernelShare = t.user + t.kernel === 0
      ? 0
      : t.kernel / (t.user + t.kernel);
    lines.push(
      `| ${name === "base" ? `base (${baseCommit})` : name} | ${
        round(med(name)!, 1)
      } | ${ratio} | ${round(above, 1)} | ${aboveRatio} | ${
        round(med(name)! * (1 - kernelShare), 1)
      } | ${round(med(name)! * kernelShare, 1)} |`,
    );
  }
  return lines.join("\n");
}

function positive(text: string, flag: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0) {
    console.error(`${flag} must be a positive integer, got "${text}"`);
    Deno.exit(2);
  }
  return n;
}

Deno.exit(await main());
