// The worker alone, A against B (issue 31, the worker's own CPU): two relays
// side by side in front of one mock backend, each a server of this checkout
// (the same server code on both sides) and a worker, A's from another commit
// (exported as bench:e2e's baseline is), B's this checkout's. Each round loads
// both relays at the same time, so a load spike on a shared machine falls on
// both alike, and reads each worker's CPU (/proc, every thread) per request or
// per chunk. The figure is B/A per round, median: the worker's own change,
// undiluted by the server's CPU that (l)'s ratio also carries.
//
//   deno run --allow-run --allow-net --allow-env --allow-read --allow-write=bench/results --allow-sys \
//     bench/worker_ab.ts [--baseline main] [--mode plain|stream|long] [--rounds 9]
//
// plain: 3,000 non-streaming requests per round at concurrency 8; stream:
// 1,000 16-chunk streams at concurrency 8; long: 2 streams of 20,000 chunks
// one after the other (scenario (a)'s stream).
import http from "node:http";
import { parseArgs } from "node:util";
import { startMock, startRelayServer, startWorker } from "./e2e/procs.ts";
import { readCpuNs } from "./e2e/cpu.ts";
import { baselineCheckout } from "./e2e/baseline.ts";
import { median } from "./e2e/stats.ts";
import { postChat } from "./_post_chat.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    baseline: { type: "string", default: "main" },
    mode: { type: "string", default: "plain" },
    rounds: { type: "string", default: "9" },
  },
  strict: true,
});
const mode = values.mode;
if (mode !== "plain" && mode !== "stream" && mode !== "long") {
  throw new Error("--mode is plain, stream or long");
}
const rounds = Number(values.rounds);
/** Requests per relay per round, their concurrency, and chunks per stream. */
const { requests, concurrency, tokens } = mode === "plain"
  ? { requests: 3000, concurrency: 8, tokens: 16 }
  : mode === "stream"
  ? { requests: 1000, concurrency: 8, tokens: 16 }
  : { requests: 2, concurrency: 1, tokens: 20_000 };
const body = JSON.stringify({
  model: "mock-model",
  stream: mode !== "plain",
  messages: [{ role: "user", content: "hello there" }],
  max_tokens: tokens,
});

/** `n` requests at `concurrency` to `port`, each read to its end. */
async function load(port: number, n: number): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < n) {
        await postChat<void>(port, agent, body, (res, resolve, reject) => {
          res.on("data", () => {});
          res.on(
            "end",
            () =>
              res.statusCode === 200
                ? resolve()
                : reject(new Error(`answered ${res.statusCode}`)),
          );
        });
      }
    }),
  );
  agent.destroy();
}

const base = await baselineCheckout(values.baseline, console.log);
const mock = await startMock();
const relayA = await startRelayServer({ name: "server-a" });
const relayB = await startRelayServer({ name: "server-b" });
const worker = { name: "", models: ["mock-model"], maxConcurrent: 64 };
const workerA = await startWorker(relayA, mock.url, {
  ...worker,
  name: "worker-a",
  expectWorkers: 1,
  checkout: base.dir,
});
const workerB = await startWorker(relayB, mock.url, {
  ...worker,
  name: "worker-b",
  expectWorkers: 1,
});
try {
  // Warm-up: the JIT and the connection pools.
  await Promise.all([
    load(relayA.port, Math.ceil(requests / 2)),
    load(relayB.port, Math.ceil(requests / 2)),
  ]);
  const units = requests * (mode === "plain" ? 1 : tokens);
  const a: number[] = [];
  const b: number[] = [];
  const ratio: number[] = [];
  const pids = [workerA.pid, workerB.pid];
  for (let r = 0; r < rounds; r++) {
    const before = readCpuNs(pids);
    await Promise.all([
      load(relayA.port, requests),
      load(relayB.port, requests),
    ]);
    const after = readCpuNs(pids);
    const us = (pid: number) =>
      (after.get(pid)! - before.get(pid)!) / 1000 / units;
    a.push(us(workerA.pid));
    b.push(us(workerB.pid));
    ratio.push(b[r]! / a[r]!);
  }
  const unit = mode === "plain" ? "request" : "chunk";
  const list = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(", ");
  console.log(
    `worker CPU µs per ${unit}, ${mode}, ${rounds} rounds (median; rounds)`,
  );
  console.log(`  A ${base.commit}  ${median(a).toFixed(2)}  [${list(a)}]`);
  console.log(`  B this checkout  ${median(b).toFixed(2)}  [${list(b)}]`);
  console.log(
    `  B/A per round, median ${median(ratio).toFixed(3)}  [${list(ratio)}]`,
  );
} finally {
  for (const p of [workerA, workerB, relayA.proc, relayB.proc, mock.proc]) {
    await p.stop(2000);
  }
  await base.remove();
}
Deno.exit(0);
