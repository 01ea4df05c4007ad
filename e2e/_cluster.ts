// A relay of real processes for the end-to-end tests: the mock backend (with a
// stats port), the server and N workers, each `deno run` with explicit
// permissions. `withCluster` always stops every process, even when the test fails.
import type { MockBackendStats } from "../mock/backend.ts";
import { type Child, stopInReverse, waitUntil } from "../shell/procs.ts";
import {
  startMockProcess,
  startRelayProcesses,
} from "../shell/demo/cluster.ts";

export const MODEL = "mock-model";
/** The mock's canned answer; `max_tokens: n` streams its first n words (cycling). */
export const ANSWER =
  "The quick brown fox jumps over the lazy dog while the relay streams every word in order.";
const SECRET = "e2e-secret";

export type Cluster = {
  serverUrl: string;
  mockUrl: string;
  server: Child;
  mock: Child;
  workers: Child[];
  stats(): Promise<MockBackendStats>;
};

export type ClusterOptions = {
  /** One entry per worker: its name and max_concurrent. */
  workers: { name: string; maxConcurrent: number }[];
  /** Mock pace, ms per word (non-streaming answers wait words × this). */
  delayMs?: number;
  /** More server settings (issue 26: admin token, keys, limits). */
  serverEnv?: Record<string, string>;
  /** More models the mock lists besides MODEL. */
  extraModels?: string[];
};

/** The first `n` words of the mock answer, as the mock streams them. */
export function answerWords(n: number): string {
  const words = ANSWER.match(/\S+\s*/g)!;
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const w = words[i % words.length]!;
    out.push(i < n - 1 && !/\s$/.test(w) ? w + " " : w);
  }
  return out.join("");
}

export async function withCluster(
  opts: ClusterOptions,
  body: (c: Cluster) => Promise<void>,
): Promise<void> {
  const started: Child[] = [];
  try {
    const mock = await startMockProcess({
      script: "e2e/_mock_with_stats.ts",
      delayMs: opts.delayMs ?? 30,
      models: [MODEL, "error-400", "error-404", ...(opts.extraModels ?? [])],
    });
    started.push(mock.child);
    const statsUrl = (await mock.child.waitForLine(/stats on (\S+)/))[1]!;
    const { server, workers } = await startRelayProcesses(started, {
      secret: SECRET,
      serverEnv: { TICK_MS: "20", ...opts.serverEnv },
      // `forwarding request` (debug) tells which worker got a request.
      workers: opts.workers.map((w) => ({
        ...w,
        backendUrl: mock.url,
        env: { LOG_LEVEL: "debug" },
      })),
    });
    await body({
      serverUrl: server.url,
      mockUrl: mock.url,
      server: server.child,
      mock: mock.child,
      workers,
      async stats() {
        return await (await fetch(statsUrl)).json() as MockBackendStats;
      },
    });
  } finally {
    // Workers first (they drain), then the server, then the mock; SIGKILL any
    // that has not exited within 5 s.
    await stopInReverse(started);
  }
}

/** The worker whose log shows it forwarding a request to the backend, once one does. */
export async function workerForwarding(workers: Child[]): Promise<Child> {
  let found: Child | undefined;
  await waitUntil("a worker to forward the request", () => {
    found = workers.find((w) =>
      w.lines.some((l) => l.includes("forwarding request"))
    );
    return found !== undefined;
  }, 10_000);
  return found!;
}
