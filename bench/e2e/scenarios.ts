// The e2e scenarios (issue 10, a-g). Each runs through the relay and straight to
// the backend, interleaved, alternating which goes first each round, after one
// unrecorded warm-up of each; figures are medians over rounds with the raw
// per-round values kept.
import type http from "node:http";
import {
  type Checker,
  newAgent,
  pool,
  postOnce,
  streamOnce,
  type StreamResult,
  type Target,
} from "./client.ts";
import { startFleet } from "./fleet.ts";
import { waitUntil } from "../../shell/procs.ts";
import { type Relay, rssKiB, startWorker } from "./procs.ts";
import { median, percentile, round } from "./stats.ts";

export type Figure = {
  metric: string;
  unit: string;
  relay: number;
  /** null: the figure has no direct counterpart (server memory). */
  direct: number | null;
  /** relay/direct for throughput figures. */
  ratio?: number;
  /** relay − direct for latency figures. */
  added?: number;
  target?: string;
  met?: boolean;
  raw: { relay: number[]; direct: number[] };
};

export type ScenarioResult = {
  id: string;
  title: string;
  params: Record<string, number | string>;
  figures: Figure[];
};

export type Ctx = {
  relay: Target;
  direct: Target;
  relayServer: Relay;
  model: string;
  checker: Checker;
  /** Where workers forward to (the mock, or BACKEND_URL). */
  backendUrl: string;
  /** Relay and direct targets for scenario (c)'s timestamping backend, if any. */
  stamp: { relay: Target; direct: Target } | null;
  rounds: number;
  log: (line: string) => void;
};

const STREAM_TIMEOUT_MS = 120_000;

/** Interleaved rounds: even rounds direct first, odd rounds relay first. */
async function interleave<T>(
  c: Ctx,
  targets: { relay: Target; direct: Target },
  rounds: number,
  run: (t: Target) => Promise<T>,
): Promise<{ relay: T[]; direct: T[] }> {
  await run(targets.direct);
  await run(targets.relay);
  const out = { relay: [] as T[], direct: [] as T[] };
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0
      ? [targets.direct, targets.relay]
      : [targets.relay, targets.direct];
    for (const t of order) out[t.name].push(await run(t));
  }
  c.log(`  ${rounds} rounds done`);
  return out;
}

function throughput(
  metric: string,
  unit: string,
  raw: { relay: number[]; direct: number[] },
  floor: number,
): Figure {
  const relay = median(raw.relay);
  const direct = median(raw.direct);
  const ratio = relay / direct;
  return {
    metric,
    unit,
    relay: round(relay, 1),
    direct: round(direct, 1),
    ratio: round(ratio),
    target: `ratio >= ${floor}`,
    met: ratio >= floor,
    raw: {
      relay: raw.relay.map((v) => round(v, 1)),
      direct: raw.direct.map((v) => round(v, 1)),
    },
  };
}

function latency(
  metric: string,
  raw: { relay: number[]; direct: number[] },
  maxAdded?: number,
): Figure {
  const relay = median(raw.relay);
  const direct = median(raw.direct);
  const added = relay - direct;
  return {
    metric,
    unit: "ms",
    relay: round(relay),
    direct: round(direct),
    added: round(added),
    ...(maxAdded === undefined
      ? {}
      : { target: `added <= ${maxAdded} ms`, met: added <= maxAdded }),
    raw: {
      relay: raw.relay.map((v) => round(v)),
      direct: raw.direct.map((v) => round(v)),
    },
  };
}

/** (a) One stream of many small chunks: chunks per second. */
export async function scenarioA(
  c: Ctx,
  chunks: number,
  floor = 0.5,
): Promise<ScenarioResult> {
  c.log(`(a) one stream of ${chunks} chunks`);
  const agent = newAgent();
  const raw = await interleave(c, c, c.rounds, async (t) => {
    const r = await streamOnce(t, {
      model: c.model,
      maxTokens: chunks,
      checker: c.checker,
      agent,
      timeoutMs: STREAM_TIMEOUT_MS,
    });
    return r.chunks / (r.totalMs / 1000);
  });
  agent.destroy();
  return {
    id: "a",
    title: `one stream x ${chunks} chunks`,
    params: { chunks, rounds: c.rounds },
    figures: [throughput("throughput", "chunks/s", raw, floor)],
  };
}

/** (b) Many concurrent streams: aggregate chunks per second. */
export async function scenarioB(
  c: Ctx,
  streams: number,
  chunks: number,
  floor = 0.5,
): Promise<ScenarioResult> {
  c.log(`(b) ${streams} concurrent streams x ${chunks} chunks`);
  const agent = newAgent();
  const raw = await interleave(c, c, c.rounds, async (t) => {
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
    return total / ((performance.now() - start) / 1000);
  });
  agent.destroy();
  return {
    id: "b",
    title: `${streams} concurrent streams x ${chunks} chunks`,
    params: { streams, chunks, rounds: c.rounds },
    figures: [throughput("throughput", "chunks/s", raw, floor)],
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
  const targets = c.stamp ?? c;
  const checker: Checker = c.stamp === null ? c.checker : "stamp";
  const pace = c.checker === "generic"
    ? "at the backend's own pace"
    : `${delayMs} ms between chunks`;
  c.log(`(c) ${streams} concurrent streams x ${chunks} chunks, ${pace}`);
  const agent = newAgent();
  const runs = await interleave(c, targets, c.rounds, async (t) => {
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
      ttfcP50: percentile(ttfc, 50),
      ttfcP99: percentile(ttfc, 99),
      lagP50: percentile(lags, 50),
      lagP99: percentile(lags, 99),
    };
  });
  agent.destroy();
  const pick = (k: keyof (typeof runs.relay)[number]) => ({
    relay: runs.relay.map((r) => r[k]),
    direct: runs.direct.map((r) => r[k]),
  });
  const figures = [
    latency("time to first chunk p50", pick("ttfcP50"), 2),
    latency("time to first chunk p99", pick("ttfcP99"), 10),
  ];
  if (c.stamp !== null) {
    figures.push(
      latency("chunk latency p50", pick("lagP50")),
      latency("chunk latency p99", pick("lagP99")),
    );
  }
  return {
    id: "c",
    title: `${streams} concurrent streams, ${pace}`,
    params: { streams, chunks, delayMs, rounds: c.rounds },
    figures,
  };
}

/** (d) Small non-streaming requests at a fixed concurrency: requests per second. */
export async function scenarioD(
  c: Ctx,
  requests: number,
  concurrency: number,
  maxTokens: number,
): Promise<ScenarioResult> {
  c.log(`(d) ${requests} non-streaming requests at concurrency ${concurrency}`);
  const agent = newAgent();
  const runs = await interleave(c, c, c.rounds, async (t) => {
    const start = performance.now();
    const results = await pool(
      requests,
      concurrency,
      60_000,
      () =>
        postOnce(t, {
          model: c.model,
          maxTokens,
          checker: c.checker,
          agent,
          timeoutMs: 30_000,
        }),
    );
    const secs = (performance.now() - start) / 1000;
    const ms = results.map((r) => r.totalMs);
    return {
      rps: results.length / secs,
      p50: percentile(ms, 50),
      p99: percentile(ms, 99),
    };
  });
  agent.destroy();
  const pick = (k: "rps" | "p50" | "p99") => ({
    relay: runs.relay.map((r) => r[k]),
    direct: runs.direct.map((r) => r[k]),
  });
  return {
    id: "d",
    title: `non-streaming, concurrency ${concurrency}`,
    params: { requests, concurrency, maxTokens, rounds: c.rounds },
    figures: [
      throughput("requests/s", "req/s", pick("rps"), 0.4),
      latency("latency p50", pick("p50")),
      latency("latency p99", pick("p99")),
    ],
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
  await fleet.close();
  // Later scenarios count workers: wait until the server saw every close.
  await waitUntil(
    "the fleet to disconnect",
    async () => (await c.relayServer.workersConnected()) === before,
    30_000,
  );
  const perWorker = (rssAfter - rssBefore) / workers;
  return {
    id: "e",
    title: `${workers} connected idle workers`,
    params: {
      workers,
      rssBeforeKiB: rssBefore,
      rssAfterKiB: rssAfter,
      connectSecs: round(connectSecs, 2),
    },
    figures: [{
      metric: "server memory per idle worker",
      unit: "KiB",
      relay: round(perWorker, 1),
      direct: null,
      target: "<= 64 KiB",
      met: perWorker <= 64,
      raw: { relay: [rssBefore, rssAfter], direct: [] },
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
          const p = streamOnce(c.relay, {
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
        target: "<= 32 KiB",
        met: perStream <= 32,
        raw: { relay: [rssBefore, rssAfter], direct: [] },
      }],
    };
  } finally {
    stop.abort();
    await Promise.all(pending);
    agent.destroy();
    await Promise.all(procs.map((p) => p.stop(5000)));
  }
}

/** (g) One client, one request after another: added latency against direct. */
export async function scenarioG(
  c: Ctx,
  requests: number,
  maxTokens: number,
): Promise<ScenarioResult> {
  c.log(
    `(g) ${requests} sequential requests per kind, ${maxTokens} chunks each`,
  );
  const agent = newAgent();
  const runs = await interleave(c, c, c.rounds, async (t) => {
    const stream: number[] = [];
    const ttfc: number[] = [];
    const plain: number[] = [];
    const stopAt = performance.now() + 60_000;
    for (let i = 0; i < requests && performance.now() < stopAt; i++) {
      const s = await streamOnce(t, {
        model: c.model,
        maxTokens,
        checker: c.checker,
        agent,
        timeoutMs: 30_000,
      });
      stream.push(s.totalMs);
      ttfc.push(s.ttfcMs);
      const p = await postOnce(t, {
        model: c.model,
        maxTokens,
        checker: c.checker,
        agent,
        timeoutMs: 30_000,
      });
      plain.push(p.totalMs);
    }
    return {
      streamP50: percentile(stream, 50),
      streamP99: percentile(stream, 99),
      ttfcP50: percentile(ttfc, 50),
      ttfcP99: percentile(ttfc, 99),
      plainP50: percentile(plain, 50),
      plainP99: percentile(plain, 99),
    };
  });
  agent.destroy();
  const pick = (k: keyof (typeof runs.relay)[number]) => ({
    relay: runs.relay.map((r) => r[k]),
    direct: runs.direct.map((r) => r[k]),
  });
  return {
    id: "g",
    title: "one client, sequential requests",
    params: { requests, maxTokens, rounds: c.rounds },
    figures: [
      latency("non-streaming p50", pick("plainP50"), 1),
      latency("non-streaming p99", pick("plainP99")),
      latency("streaming total p50", pick("streamP50"), 1),
      latency("streaming total p99", pick("streamP99")),
      latency("streaming first chunk p50", pick("ttfcP50")),
      latency("streaming first chunk p99", pick("ttfcP99")),
    ],
  };
}
