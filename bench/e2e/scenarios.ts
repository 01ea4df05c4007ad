// The e2e scenarios (issue 10, a-g; issue 18 adds h, the nginx path and CPU per
// unit). Each timed scenario runs through the relay, straight to the backend and
// through nginx (when it runs), interleaved with the order rotated each round,
// after one unrecorded warm-up of each; figures are medians over rounds with
// the raw per-round values kept, and CPU time of every process is summed per
// path over the rounds.
import type http from "node:http";
import {
  type Checker,
  embedOnce,
  newAgent,
  PATH_NAMES,
  type PathName,
  pool,
  postOnce,
  type PostResult,
  streamOnce,
  type StreamResult,
  type Target,
} from "./client.ts";
import {
  type CpuFigure,
  cpuFigure,
  type CpuProcs,
  type CpuTally,
  ROLES,
  snapshot,
  zeroCpu,
} from "./cpu.ts";
import { startFleet } from "./fleet.ts";
import { waitUntil } from "../../shell/procs.ts";
import { type Relay, rssKiB, startWorker } from "./procs.ts";
import { median, percentile, round } from "./stats.ts";

export type PerPath<T> = Record<PathName, T>;

export type Figure = {
  metric: string;
  unit: string;
  relay: number;
  /** null: the figure has no direct counterpart (server memory). */
  direct: number | null;
  /** null: nginx did not run, or the figure has no nginx counterpart. */
  nginx: number | null;
  /** null: the naive relay did not run, or the figure has no counterpart. */
  naive: number | null;
  /** null: no baseline ran (bench:e2e --baseline, issue 31), or no counterpart. */
  base: number | null;
  /** relay/direct, nginx/direct, naive/direct, base/direct for throughput figures. */
  ratio?: number;
  nginxRatio?: number;
  naiveRatio?: number;
  baseRatio?: number;
  /** relay − direct, nginx − direct and naive − direct for latency figures. */
  added?: number;
  nginxAdded?: number;
  naiveAdded?: number;
  baseAdded?: number;
  /** The target for the relay; the nginx column shows the moonshot. */
  target?: string;
  met?: boolean;
  raw: PerPath<number[]>;
};

export type ScenarioResult = {
  id: string;
  title: string;
  params: Record<string, number | string>;
  figures: Figure[];
  /** CPU per chunk or request of every process, one entry per path that ran. */
  cpu?: CpuFigure[];
};

/** Where each path's requests go; nginx null when it is not running. */
export type Paths = {
  relay: Target;
  direct: Target;
  nginx: Target | null;
  /** The naive relay of issue 31; null when it is not running. */
  naive: Target | null;
  /** An older commit's server and worker (bench:e2e --baseline); null when not running. */
  base: Target | null;
};

export type Ctx = {
  paths: Paths;
  relayServer: Relay;
  model: string;
  checker: Checker;
  /** Where workers forward to (the mock, or BACKEND_URL). */
  backendUrl: string;
  /** The processes whose CPU is counted (backend = the mock or nothing). */
  procs: CpuProcs;
  /** Paths and processes for scenario (c)'s timestamping backend, if any. */
  stamp: { paths: Paths; procs: CpuProcs } | null;
  rounds: number;
  log: (line: string) => void;
};

const STREAM_TIMEOUT_MS = 120_000;

/** What a measured run delivered, for CPU per unit. */
type Measured<T> = { value: T; units: number };

/**
 * Interleaved rounds over the paths that run: round r takes PATH_NAMES rotated
 * by r (direct, relay, nginx; then relay, nginx, direct; …), so no path always
 * runs first or last. Every process's CPU time is read right before and after
 * each measured run and summed per path. The runs share one keep-alive agent,
 * destroyed after the last round.
 */
async function interleave<T>(
  c: Ctx,
  per: "chunk" | "request",
  run: (t: Target, agent: http.Agent) => Promise<Measured<T>>,
  on: { paths: Paths; procs: CpuProcs } = c,
): Promise<{ values: PerPath<T[]>; cpu: CpuFigure[] }> {
  const agent = newAgent();
  try {
    return await interleaveWith(
      c,
      on.paths,
      on.procs,
      per,
      (t) => run(t, agent),
    );
  } finally {
    agent.destroy();
  }
}

async function interleaveWith<T>(
  c: Ctx,
  paths: Paths,
  procs: CpuProcs,
  per: "chunk" | "request",
  run: (t: Target) => Promise<Measured<T>>,
): Promise<{ values: PerPath<T[]>; cpu: CpuFigure[] }> {
  const active = PATH_NAMES.flatMap((p) => {
    const t = paths[p];
    return t === null ? [] : [t];
  });
  for (const t of active) await run(t);
  const values: PerPath<T[]> = {
    relay: [],
    direct: [],
    nginx: [],
    naive: [],
    base: [],
  };
  const tallies: PerPath<CpuTally> = {
    relay: { units: 0, rounds: 0, cpuNs: zeroCpu() },
    direct: { units: 0, rounds: 0, cpuNs: zeroCpu() },
    nginx: { units: 0, rounds: 0, cpuNs: zeroCpu() },
    naive: { units: 0, rounds: 0, cpuNs: zeroCpu() },
    base: { units: 0, rounds: 0, cpuNs: zeroCpu() },
  };
  for (let r = 0; r < c.rounds; r++) {
    for (let i = 0; i < active.length; i++) {
      const t = active[(i + r) % active.length]!;
      const before = snapshot(procs);
      const m = await run(t);
      const after = snapshot(procs);
      values[t.name].push(m.value);
      const tally = tallies[t.name];
      tally.units += m.units;
      tally.rounds++;
      for (const role of ROLES) tally.cpuNs[role] += after[role] - before[role];
    }
  }
  c.log(`  ${c.rounds} rounds done`);
  return {
    values,
    cpu: active.map((t) => cpuFigure(t.name, per, tallies[t.name], procs)),
  };
}

function pick<T>(
  values: PerPath<T[]>,
  key: (v: T) => number,
): PerPath<number[]> {
  return {
    relay: values.relay.map(key),
    direct: values.direct.map(key),
    nginx: values.nginx.map(key),
    naive: values.naive.map(key),
    base: values.base.map(key),
  };
}

function medianOrNull(values: number[]): number | null {
  return values.length === 0 ? null : median(values);
}

function rawRounded(raw: PerPath<number[]>, digits: number): PerPath<number[]> {
  return {
    relay: raw.relay.map((v) => round(v, digits)),
    direct: raw.direct.map((v) => round(v, digits)),
    nginx: raw.nginx.map((v) => round(v, digits)),
    naive: raw.naive.map((v) => round(v, digits)),
    base: raw.base.map((v) => round(v, digits)),
  };
}

/** The median of each path's values (null for a path that did not run). */
function medians(raw: PerPath<number[]>) {
  return {
    relay: median(raw.relay),
    direct: median(raw.direct),
    nginx: medianOrNull(raw.nginx),
    naive: medianOrNull(raw.naive),
    base: medianOrNull(raw.base),
  };
}

function throughput(
  metric: string,
  unit: string,
  raw: PerPath<number[]>,
  floor: number,
): Figure {
  const { relay, direct, nginx, naive, base } = medians(raw);
  const ratio = relay / direct;
  return {
    metric,
    unit,
    relay: round(relay, 1),
    direct: round(direct, 1),
    nginx: nginx === null ? null : round(nginx, 1),
    ratio: round(ratio),
    naive: naive === null ? null : round(naive, 1),
    base: base === null ? null : round(base, 1),
    ...(nginx === null ? {} : { nginxRatio: round(nginx / direct) }),
    ...(naive === null ? {} : { naiveRatio: round(naive / direct) }),
    ...(base === null ? {} : { baseRatio: round(base / direct) }),
    target: `≥ ${floor}`,
    met: ratio >= floor,
    raw: rawRounded(raw, 1),
  };
}

function latency(
  metric: string,
  raw: PerPath<number[]>,
  maxAdded?: number,
): Figure {
  const { relay, direct, nginx, naive, base } = medians(raw);
  const added = relay - direct;
  return {
    metric,
    unit: "ms",
    relay: round(relay),
    direct: round(direct),
    nginx: nginx === null ? null : round(nginx),
    added: round(added),
    naive: naive === null ? null : round(naive),
    base: base === null ? null : round(base),
    ...(nginx === null ? {} : { nginxAdded: round(nginx - direct) }),
    ...(naive === null ? {} : { naiveAdded: round(naive - direct) }),
    ...(base === null ? {} : { baseAdded: round(base - direct) }),
    ...(maxAdded === undefined
      ? {}
      : { target: `≤ +${maxAdded} ms`, met: added <= maxAdded }),
    raw: rawRounded(raw, 3),
  };
}

type RateAndLatency = { rps: number; p50: number; p99: number };

/** `requests` calls of `one`, `concurrency` at a time (60 s at most):
 * requests per second and the latency percentiles of one round. */
async function rateAndLatency(
  requests: number,
  concurrency: number,
  one: () => Promise<{ totalMs: number }>,
): Promise<Measured<RateAndLatency>> {
  const start = performance.now();
  const results = await pool(requests, concurrency, 60_000, one);
  const secs = (performance.now() - start) / 1000;
  const ms = results.map((r) => r.totalMs);
  return {
    value: {
      rps: results.length / secs,
      p50: percentile(ms, 50),
      p99: percentile(ms, 99),
    },
    units: results.length,
  };
}

function rateAndLatencyFigures(values: PerPath<RateAndLatency[]>): Figure[] {
  return [
    throughput("requests/s", "req/s", pick(values, (v) => v.rps), 0.5),
    latency("latency p50", pick(values, (v) => v.p50)),
    latency("latency p99", pick(values, (v) => v.p99)),
  ];
}

/** One checked non-streaming chat request of the scenario's model. */
function plainOnce(
  c: Ctx,
  t: Target,
  agent: http.Agent,
  maxTokens: number,
): Promise<PostResult> {
  return postOnce(t, {
    model: c.model,
    maxTokens,
    checker: c.checker,
    agent,
    timeoutMs: 30_000,
  });
}

/** (a) One stream of many small chunks: chunks per second. */
export async function scenarioA(
  c: Ctx,
  chunks: number,
  floor = 0.8,
): Promise<ScenarioResult> {
  c.log(`(a) one stream of ${chunks} chunks`);
  const { values, cpu } = await interleave(
    c,
    "chunk",
    async (t, agent) => {
      const r = await streamOnce(t, {
        model: c.model,
        maxTokens: chunks,
        checker: c.checker,
        agent,
        timeoutMs: STREAM_TIMEOUT_MS,
      });
      return { value: r.chunks / (r.totalMs / 1000), units: r.chunks };
    },
  );
  return {
    id: "a",
    title: `one stream x ${chunks} chunks`,
    params: { chunks, rounds: c.rounds },
    figures: [throughput("throughput", "chunks/s", values, floor)],
    cpu,
  };
}

/** (b) Many concurrent streams: aggregate chunks per second. */
export async function scenarioB(
  c: Ctx,
  streams: number,
  chunks: number,
  floor = 0.75,
): Promise<ScenarioResult> {
  c.log(`(b) ${streams} concurrent streams x ${chunks} chunks`);
  const { values, cpu } = await interleave(
    c,
    "chunk",
    async (t, agent) => {
      const start = performance.now();
      const results = await Promise.all(
        Array.from({ length: streams }, () =>
          streamOnce(t, {
            model: c.model,
            maxTokens: chunks,
            checker: c.checker,
            agent,
            timeoutMs: STREAM_TIMEOUT_MS,
          })),
      );
      const total = results.reduce((n, r) => n + r.chunks, 0);
      return {
        value: total / ((performance.now() - start) / 1000),
        units: total,
      };
    },
  );
  return {
    id: "b",
    title: `${streams} concurrent streams x ${chunks} chunks`,
    params: { streams, chunks, rounds: c.rounds },
    figures: [throughput("throughput", "chunks/s", values, floor)],
    cpu,
  };
}

/**
 * (c) Many concurrent paced streams: time to first chunk and per-chunk latency.
 * `delayMs` paces the mock (x-mock-delay-ms); a real backend keeps its own pace
 * (it ignores the header), so its title says so.
 */
export async function scenarioC(
  c: Ctx,
  streams: number,
  chunks: number,
  delayMs: number,
): Promise<ScenarioResult> {
  const paths = c.stamp?.paths ?? c.paths;
  const procs = c.stamp?.procs ?? c.procs;
  const checker: Checker = c.stamp === null ? c.checker : "stamp";
  const pace = c.checker === "generic"
    ? "at the backend's own pace"
    : `${delayMs} ms between chunks`;
  c.log(`(c) ${streams} concurrent streams x ${chunks} chunks, ${pace}`);
  const { values, cpu } = await interleave(
    c,
    "chunk",
    async (t, agent) => {
      const results: StreamResult[] = await Promise.all(
        Array.from({ length: streams }, () =>
          streamOnce(t, {
            model: c.stamp === null ? c.model : "stamp-model",
            maxTokens: chunks,
            delayMs,
            checker,
            agent,
            timeoutMs: STREAM_TIMEOUT_MS,
          })),
      );
      const ttfc = results.map((r) => r.ttfcMs);
      const lags = results.flatMap((r) => r.lagsMs);
      return {
        value: {
          ttfcP50: percentile(ttfc, 50),
          ttfcP99: percentile(ttfc, 99),
          lagP50: percentile(lags, 50),
          lagP99: percentile(lags, 99),
        },
        units: results.reduce((n, r) => n + r.chunks, 0),
      };
    },
    { paths, procs },
  );
  const figures = [
    latency("time to first chunk p50", pick(values, (v) => v.ttfcP50), 10),
    latency("time to first chunk p99", pick(values, (v) => v.ttfcP99), 30),
  ];
  if (c.stamp !== null) {
    figures.push(
      latency("chunk latency p50", pick(values, (v) => v.lagP50)),
      latency("chunk latency p99", pick(values, (v) => v.lagP99)),
    );
  }
  return {
    id: "c",
    title: `${streams} concurrent streams, ${pace}`,
    params: { streams, chunks, delayMs, rounds: c.rounds },
    figures,
    cpu,
  };
}

/** (d) Small non-streaming requests at a fixed concurrency: requests per second. */
export async function scenarioD(
  c: Ctx,
  requests: number,
  concurrency: number,
  maxTokens: number,
  id = "d",
): Promise<ScenarioResult> {
  c.log(
    `(${id}) ${requests} non-streaming requests at concurrency ${concurrency}`,
  );
  const { values, cpu } = await interleave(
    c,
    "request",
    (t, agent) =>
      rateAndLatency(
        requests,
        concurrency,
        () => plainOnce(c, t, agent, maxTokens),
      ),
  );
  return {
    id,
    title: `non-streaming, concurrency ${concurrency}`,
    params: { requests, concurrency, maxTokens, rounds: c.rounds },
    figures: rateAndLatencyFigures(values),
    cpu,
  };
}

/**
 * (l) Issue 31's "CPU per plain request at most half of 9ef0db5's", measured
 * paired: ours, the baseline and the naive relay serve `requests` plain
 * requests each at `concurrency`, all at the same time, so every load spike
 * of a shared machine falls on all of them alike (interleaved rounds put a
 * path's whole round in one spell). Each relay's own processes are separate,
 * so its CPU is its own; the backend and the load generator are shared and
 * left out. The figure is server + worker µs per request (the naive relay's
 * two processes; the baseline's two), median over rounds.
 */
export async function scenarioL(
  c: Ctx,
  requests: number,
  concurrency: number,
): Promise<ScenarioResult> {
  const relays = (["relay", "naive", "base"] as const).flatMap((name) => {
    const t = c.paths[name];
    return t === null ? [] : [t];
  });
  c.log(
    `(l) ${requests} non-streaming requests at concurrency ${concurrency} on ${
      relays.map((t) => t.name).join(", ")
    } at once`,
  );
  const agent = newAgent();
  const runAll = () =>
    Promise.all(
      relays.map((t) =>
        rateAndLatency(requests, concurrency, () => plainOnce(c, t, agent, 5))
      ),
    );
  await runAll(); // warm-up
  const own: CpuProcs = { ...c.procs, backend: [], loadgen: [] };
  const raw: PerPath<number[]> = {
    relay: [],
    direct: [],
    nginx: [],
    naive: [],
    base: [],
  };
  const tallies = new Map<PathName, CpuTally>();
  for (let r = 0; r < c.rounds; r++) {
    const before = snapshot(c.procs);
    const done = await runAll();
    const after = snapshot(c.procs);
    relays.forEach((t, i) => {
      const tally = tallies.get(t.name) ??
        { units: 0, rounds: 0, cpuNs: zeroCpu() };
      const one: CpuTally = {
        units: done[i]!.units,
        rounds: 1,
        cpuNs: zeroCpu(),
      };
      for (const role of ROLES) {
        one.cpuNs[role] = after[role] - before[role];
        tally.cpuNs[role] += one.cpuNs[role];
      }
      tally.units += one.units;
      tally.rounds++;
      tallies.set(t.name, tally);
      raw[t.name].push(cpuFigure(t.name, "request", one, own).totalUsPerUnit);
    });
  }
  agent.destroy();
  c.log(`  ${c.rounds} rounds done`);
  const relay = median(raw.relay);
  const base = medianOrNull(raw.base);
  // Paired: each round's ours/base, so a spike that hit one round counts once.
  const perRound = raw.base.map((b, i) => raw.relay[i]! / b);
  const ratioFigure: Figure[] = base === null ? [] : [{
    metric: "CPU per request, ours / base per round",
    unit: "×",
    relay: round(median(perRound)),
    direct: null,
    nginx: null,
    naive: null,
    base: null,
    target: "≤ 0.5",
    met: median(perRound) <= 0.5,
    raw: {
      relay: perRound.map((v) => round(v)),
      direct: [],
      nginx: [],
      naive: [],
      base: [],
    },
  }];
  return {
    id: "l",
    title:
      `non-streaming, concurrency ${concurrency}, relays at once: server + worker CPU`,
    params: { requests, concurrency, rounds: c.rounds },
    figures: [{
      metric: "CPU per request, paired",
      unit: "µs",
      relay: round(relay, 1),
      direct: null,
      nginx: null,
      naive: raw.naive.length === 0 ? null : round(median(raw.naive), 1),
      base: base === null ? null : round(base, 1),
      ...(base === null
        ? {}
        : { target: "≤ half of base's", met: relay <= base / 2 }),
      raw: rawRounded(raw, 1),
    }, ...ratioFigure],
    cpu: relays.map((t) =>
      cpuFigure(t.name, "request", tallies.get(t.name)!, own)
    ),
  };
}

/**
 * (k) The gateway board's "throughput with p99 held" (issue 31): non-streaming
 * requests at concurrency 1, 4, 16 and 64, `requests` at each; the figure is
 * the highest requests/s among the levels whose p99 stayed within `p99Ms`
 * (0 when none did). CPU is per request over all levels.
 */
export async function scenarioK(
  c: Ctx,
  requests: number,
  p99Ms: number,
): Promise<ScenarioResult> {
  const levels = [1, 4, 16, 64];
  c.log(
    `(k) non-streaming at concurrency ${
      levels.join(", ")
    }: best req/s with p99 ≤ ${p99Ms} ms`,
  );
  const { values, cpu } = await interleave(
    c,
    "request",
    async (t, agent) => {
      let best = 0;
      let units = 0;
      for (const level of levels) {
        const m = await rateAndLatency(
          requests,
          level,
          () => plainOnce(c, t, agent, 5),
        );
        units += m.units;
        if (m.value.p99 <= p99Ms) best = Math.max(best, m.value.rps);
      }
      return { value: best, units };
    },
  );
  return {
    id: "k",
    title: `non-streaming, best throughput with p99 ≤ ${p99Ms} ms`,
    params: { requests, p99Ms, levels: levels.join(","), rounds: c.rounds },
    figures: [
      throughput("requests/s, p99 held", "req/s", pick(values, (v) => v), 0.4),
    ],
    cpu,
  };
}

async function settledRss(pid: number): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < 3; i++) {
    await new Promise((r) => setTimeout(r, 500));
    samples.push(rssKiB(pid));
  }
  return median(samples);
}

/** (e) Many connected idle workers: server memory per worker. */
export async function scenarioE(
  c: Ctx,
  workers: number,
): Promise<ScenarioResult> {
  c.log(`(e) ${workers} connected idle workers`);
  const pid = c.relayServer.proc.pid;
  const before = await c.relayServer.workersConnected();
  const rssBefore = await settledRss(pid);
  const t0 = performance.now();
  const fleet = await startFleet(c.relayServer.url, workers);
  const connectSecs = (performance.now() - t0) / 1000;
  const connected = await c.relayServer.workersConnected();
  if (connected - before !== workers) {
    await fleet.close();
    throw new Error(
      `(e) server counts ${connected - before} fleet workers, want ${workers}`,
    );
  }
  const rssAfter = await settledRss(pid);
  // As many again: what one more worker costs, without what the first burst
  // costs once whatever its size (V8's young generation growing to its cap,
  // code paged in and compiled), which the figure above divides among them.
  const fleet2 = await startFleet(c.relayServer.url, workers);
  const connected2 = await c.relayServer.workersConnected();
  const rssAfter2 = await settledRss(pid);
  await fleet2.close();
  await fleet.close();
  if (connected2 - before !== 2 * workers) {
    throw new Error(
      `(e) server counts ${connected2 - before} fleet workers, want ${
        2 * workers
      }`,
    );
  }
  // Later scenarios count workers: wait until the server saw every close.
  await waitUntil(
    "the fleet to disconnect",
    async () => (await c.relayServer.workersConnected()) === before,
    30_000,
  );
  const perWorker = (rssAfter - rssBefore) / workers;
  const perExtraWorker = (rssAfter2 - rssAfter) / workers;
  return {
    id: "e",
    title: `${workers} connected idle workers`,
    params: {
      workers,
      rssBeforeKiB: rssBefore,
      rssAfterKiB: rssAfter,
      rssAfter2xKiB: rssAfter2,
      connectSecs: round(connectSecs, 2),
    },
    figures: [{
      metric: "server memory per idle worker",
      unit: "KiB",
      relay: round(perWorker, 1),
      direct: null,
      nginx: null,
      naive: null,
      base: null,
      target: "≤ 16 KiB",
      met: perWorker <= 16,
      raw: {
        relay: [rssBefore, rssAfter],
        direct: [],
        nginx: [],
        naive: [],
        base: [],
      },
    }, {
      metric: `memory per worker, ${workers} → ${2 * workers}`,
      unit: "KiB",
      relay: round(perExtraWorker, 1),
      direct: null,
      nginx: null,
      naive: null,
      base: null,
      raw: {
        relay: [rssAfter, rssAfter2],
        direct: [],
        nginx: [],
        naive: [],
        base: [],
      },
    }],
  };
}

/** (f) Many open slow streams: server memory per stream. */
export async function scenarioF(
  c: Ctx,
  streams: number,
  workerCapacity: number,
): Promise<ScenarioResult> {
  const extra = Math.ceil(streams / workerCapacity);
  c.log(`(f) ${streams} open slow streams over ${extra} more workers`);
  const before = await c.relayServer.workersConnected();
  const procs = [];
  for (let i = 0; i < extra; i++) {
    procs.push(
      await startWorker(c.relayServer, c.backendUrl, {
        name: `bench-slow-${i}`,
        models: [c.model],
        maxConcurrent: workerCapacity,
        expectWorkers: before + i + 1,
      }),
    );
  }
  const pid = c.relayServer.proc.pid;
  const agent: http.Agent = newAgent();
  const stop = new AbortController();
  const rssBefore = await settledRss(pid);
  let open = 0;
  const pending: Promise<unknown>[] = [];
  const t0 = performance.now();
  try {
    // 100 lanes, each opening its next stream once the previous one answered.
    await pool(
      streams,
      100,
      90_000,
      () =>
        new Promise<void>((resolve, reject) => {
          const p = streamOnce(c.paths.relay, {
            model: c.model,
            maxTokens: 1000,
            delayMs: 5000,
            checker: c.checker,
            agent,
            signal: stop.signal,
            onResponse: () => {
              open++;
              resolve();
            },
            timeoutMs: 300_000,
          });
          pending.push(p.catch(() => {}));
          p.catch(reject);
        }),
    );
    if (open !== streams) {
      throw new Error(`(f) only ${open} of ${streams} streams opened`);
    }
    const openSecs = (performance.now() - t0) / 1000;
    const rssAfter = await settledRss(pid);
    const perStream = (rssAfter - rssBefore) / streams;
    return {
      id: "f",
      title: `${streams} open slow streams`,
      params: {
        streams,
        workers: extra,
        chunkDelayMs: 5000,
        rssBeforeKiB: rssBefore,
        rssAfterKiB: rssAfter,
        openSecs: round(openSecs, 2),
      },
      figures: [{
        metric: "server memory per open stream",
        unit: "KiB",
        relay: round(perStream, 1),
        direct: null,
        nginx: null,
        naive: null,
        base: null,
        target: "≤ 12 KiB",
        met: perStream <= 12,
        raw: {
          relay: [rssBefore, rssAfter],
          direct: [],
          nginx: [],
          naive: [],
          base: [],
        },
      }],
    };
  } finally {
    stop.abort();
    await Promise.all(pending);
    agent.destroy();
    await Promise.all(procs.map((p) => p.stop(5000)));
  }
}

/** One request after another: `requests` of them, or as many as 60 s allow. */
async function oneAfterAnother<T>(
  requests: number,
  one: () => Promise<T>,
): Promise<T[]> {
  const out: T[] = [];
  const stopAt = performance.now() + 60_000;
  for (let i = 0; i < requests && performance.now() < stopAt; i++) {
    out.push(await one());
  }
  return out;
}

/** (g) One client, one plain (non-streaming) request after another: added latency. */
export async function scenarioG(
  c: Ctx,
  requests: number,
  maxTokens: number,
): Promise<ScenarioResult> {
  c.log(`(g) ${requests} sequential non-streaming requests`);
  const { values, cpu } = await interleave(
    c,
    "request",
    async (t, agent) => {
      const ms = (await oneAfterAnother(
        requests,
        () => plainOnce(c, t, agent, maxTokens),
      )).map((p) => p.totalMs);
      return {
        value: { p50: percentile(ms, 50), p99: percentile(ms, 99) },
        units: ms.length,
      };
    },
  );
  return {
    id: "g",
    title: "one client, sequential non-streaming requests",
    params: { requests, maxTokens, rounds: c.rounds },
    figures: [
      latency("latency p50", pick(values, (v) => v.p50), 0.3),
      latency("latency p99", pick(values, (v) => v.p99)),
    ],
    cpu,
  };
}

/** (h) One client, one short stream after another: added total and first-chunk latency. */
export async function scenarioH(
  c: Ctx,
  requests: number,
  chunks: number,
): Promise<ScenarioResult> {
  c.log(`(h) ${requests} sequential streams of ${chunks} chunks`);
  const { values, cpu } = await interleave(
    c,
    "request",
    async (t, agent) => {
      const streams = await oneAfterAnother(requests, () =>
        streamOnce(t, {
          model: c.model,
          maxTokens: chunks,
          checker: c.checker,
          agent,
          timeoutMs: 30_000,
        }));
      const total = streams.map((s) => s.totalMs);
      const ttfc = streams.map((s) => s.ttfcMs);
      return {
        value: {
          totalP50: percentile(total, 50),
          totalP99: percentile(total, 99),
          ttfcP50: percentile(ttfc, 50),
          ttfcP99: percentile(ttfc, 99),
        },
        units: total.length,
      };
    },
  );
  return {
    id: "h",
    title: `one client, sequential streams x ${chunks} chunks`,
    params: { requests, chunks, rounds: c.rounds },
    figures: [
      latency("total p50", pick(values, (v) => v.totalP50), 0.3),
      latency("total p99", pick(values, (v) => v.totalP99)),
      latency("first chunk p50", pick(values, (v) => v.ttfcP50), 0.3),
      latency("first chunk p99", pick(values, (v) => v.ttfcP99)),
    ],
    cpu,
  };
}

/**
 * (i) Embeddings (issue 25): batches of `batch` short inputs on POST
 * /v1/embeddings at a fixed concurrency: requests per second.
 */
export async function scenarioI(
  c: Ctx,
  requests: number,
  concurrency: number,
  batch: number,
): Promise<ScenarioResult> {
  c.log(
    `(i) ${requests} embeddings requests of ${batch} inputs at concurrency ${concurrency}`,
  );
  const inputs = Array.from({ length: batch }, (_, i) => `short input ${i}`);
  const { values, cpu } = await interleave(
    c,
    "request",
    (t, agent) =>
      rateAndLatency(
        requests,
        concurrency,
        () =>
          embedOnce(t, { model: c.model, inputs, agent, timeoutMs: 60_000 }),
      ),
  );
  return {
    id: "i",
    title:
      `embeddings, ${batch} inputs per request, concurrency ${concurrency}`,
    params: { requests, concurrency, batch, rounds: c.rounds },
    figures: rateAndLatencyFigures(values),
    cpu,
  };
}
