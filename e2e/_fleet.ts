// Issue 30: a fleet of boxes that each hold one model at a time, behind the
// relay's real server and one real worker per box. The boxes are the swapping
// fakes of mock/swapping.ts (Ollama's and llama-swap's dialects, in this
// process) or real llama-server routers (../shared/llama, each its own
// process, `--models-max 1` over a models dir holding two copies of
// tiny.gguf). Each box counts its loads; the scenarios below read the counts.
import assert from "node:assert/strict";
import { workersConnected } from "../shell/demo/relay_probes.ts";
import { type Child, spawnProgram, waitUntil } from "../shell/procs.ts";
import {
  startServerProcess,
  startWorkerProcess,
} from "../shell/demo/cluster.ts";
import {
  startSwappingBackend,
  type SwappingDialect,
} from "../mock/swapping.ts";
import { LLAMA_DIR } from "./_llama.ts";
import {
  type OriginalWorker,
  startOriginalWorker,
} from "./_original_worker.ts";

/** One box: where it listens, and how many loads it has done so far. */
export type Box = {
  url: string;
  loads(): number;
  close(): Promise<void>;
};

const SECRET = "e2e-fleet-secret";

/** The two model ids every box lists. */
export type Pair = readonly [string, string];

export const FAKE_MODELS: Pair = ["model-a", "model-b"];
/** The router's ids: file names of the two copies of tiny.gguf. */
export const ROUTER_MODELS: Pair = ["tiny-a", "tiny-b"];

export async function startFakeBox(
  dialect: SwappingDialect,
  loadDelayMs: number,
): Promise<Box> {
  const b = await startSwappingBackend({
    dialect,
    models: [...FAKE_MODELS],
    loadDelayMs,
    chunkDelayMs: 2,
  });
  return { url: b.url, loads: () => b.stats.loads, close: b.close };
}

/**
 * A models dir for the router: two symlinks to tiny.gguf (the e2e tests may
 * not write files themselves, so `sh` makes it; removed by `drop`).
 */
export async function routerModelsDir(): Promise<
  { dir: string; drop(): Promise<void> }
> {
  const sh = (script: string) =>
    new Deno.Command("sh", { args: ["-c", script], stdout: "piped" }).output();
  const made = await sh(
    `d=$(mktemp -d) && ln -s '${LLAMA_DIR}tiny.gguf' "$d/${
      ROUTER_MODELS[0]
    }.gguf" && ln -s '${LLAMA_DIR}tiny.gguf' "$d/${
      ROUTER_MODELS[1]
    }.gguf" && echo "$d"`,
  );
  assert.ok(made.success, "could not make the models dir");
  const dir = new TextDecoder().decode(made.stdout).trim();
  return {
    dir,
    drop: async () => {
      await sh(`rm -rf '${dir}'`);
    },
  };
}

/**
 * A real llama-server in router mode with room for one model; its loads are
 * the child instances it spawns (its log says so for each).
 */
export async function startRouterBox(
  modelsDir: string,
  extraArgs: string[] = [],
): Promise<Box & { child: Child }> {
  let loads = 0;
  const child = spawnProgram({
    name: "llama-router",
    program: `${LLAMA_DIR}llama-server`,
    args: [
      "--models-dir",
      modelsDir,
      "--models-max",
      "1",
      "--host",
      "127.0.0.1",
      "--port",
      "0",
      ...extraArgs,
    ],
    linesKept: 200,
    onLine: (line) => {
      if (/spawning server instance with name=/.test(line)) loads++;
    },
  });
  try {
    const m = await child.waitForLine(
      /listening on (http:\/\/127\.0\.0\.1:\d+)/,
      30_000,
    );
    const url = m[1]!;
    await waitUntil("the router's /health to answer 200", async () => {
      const res = await fetch(`${url}/health`);
      await res.body?.cancel();
      return res.status === 200;
    }, 30_000);
    return {
      url,
      child,
      loads: () => loads,
      close: async () => {
        await child.stop(5_000);
      },
    };
  } catch (e) {
    await child.stop(3_000);
    throw e;
  }
}

export type Fleet = { serverUrl: string; server: Child; workers: Child[] };

/**
 * The relay's server and one worker per box, each a real process; all stopped
 * afterwards (the boxes too). `original`: each box gets an original-dialect
 * worker instead (e2e/_original_worker.ts, in this process): it reports no
 * residency, so the server routes as it did before issue 30 — today's count.
 */
export async function withFleet(
  boxes: Box[],
  body: (f: Fleet) => Promise<void>,
  opts: {
    serverEnv?: Record<string, string>;
    workerEnv?: Record<string, string>;
    maxConcurrent?: number;
    original?: { models: Pair };
  } = {},
): Promise<void> {
  const started: Child[] = [];
  const originals: OriginalWorker[] = [];
  try {
    const server = await startServerProcess({
      secret: SECRET,
      env: { TICK_MS: "20", ...opts.serverEnv },
    });
    started.push(server.child);
    const workers: Child[] = [];
    for (const [i, box] of boxes.entries()) {
      if (opts.original !== undefined) {
        const w = startOriginalWorker({
          serverUrl: server.url,
          secret: SECRET,
          backendUrl: box.url,
          models: [...opts.original.models],
          name: `box-${i + 1}`,
        });
        originals.push(w);
        await w.ack;
        continue;
      }
      const w = await startWorkerProcess({
        name: `box-${i + 1}`,
        serverUrl: server.url,
        secret: SECRET,
        backendUrl: box.url,
        maxConcurrent: opts.maxConcurrent ?? 4,
        ...(opts.workerEnv ? { env: opts.workerEnv } : {}),
      });
      started.push(w);
      workers.push(w);
    }
    await waitUntil(
      "every worker registered at the server",
      async () => (await workersConnected(server.url)) === boxes.length,
    );
    await body({ serverUrl: server.url, server: server.child, workers });
  } finally {
    for (const w of originals) await w.close();
    for (const c of started.reverse()) await c.stop(5_000);
    for (const b of boxes) await b.close();
  }
}

/** One chat completion through the relay: null when answered 200 with content, else what went wrong. */
export async function ask(
  serverUrl: string,
  model: string,
): Promise<string | null> {
  const res = await fetch(`${serverUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model,
      max_tokens: 4,
      messages: [{ role: "user", content: "hi" }],
    }),
  });
  const text = await res.text();
  if (res.status !== 200) return `${model}: ${res.status} ${text}`;
  const content = JSON.parse(text).choices?.[0]?.message?.content;
  return typeof content === "string" ? null : `${model}: no content ${text}`;
}

export type SwapCount = {
  /** Loads caused by 20 sequential requests alternating A,A,B,B,…. */
  alternating: number;
  /** Loads caused by 10 A and 10 B sent at once, after those. */
  concurrent: number;
  /** Requests not answered 200 with content, and why. */
  failed: string[];
};

/** The two scenarios, one after the other on the same fleet. */
export async function swapScenarios(
  serverUrl: string,
  models: Pair,
  boxes: Box[],
): Promise<SwapCount> {
  const loads = () => boxes.reduce((n, b) => n + b.loads(), 0);
  const failed: string[] = [];
  const note = (e: string | null) => e === null || failed.push(e);
  const before = loads();
  // A,A,B,B,…: the order the issue measured (a strict A,B,A,B happens to
  // match round-robin over two boxes).
  for (let i = 0; i < 20; i++) {
    note(await ask(serverUrl, models[Math.floor(i / 2) % 2]!));
  }
  const alternating = loads() - before;
  const mid = loads();
  (await Promise.all(
    Array.from({ length: 20 }, (_, i) => ask(serverUrl, models[i % 2]!)),
  )).forEach(note);
  return { alternating, concurrent: loads() - mid, failed };
}

/** Loads of both scenarios together. */
export function loadsInAll(count: SwapCount): number {
  return count.alternating + count.concurrent;
}

/** The line the tests print, so a run shows the counts beside each other. */
export function report(what: string, count: SwapCount): string {
  const failed = count.failed.length === 0
    ? ""
    : `; ${count.failed.length} failed, first: ${count.failed[0]}`;
  return `[issue 30] ${what}: 20 alternating A,A,B,B,… -> ${count.alternating} loads; 10 A + 10 B at once -> ${count.concurrent} loads; ${
    loadsInAll(count)
  } in all${failed}`;
}
