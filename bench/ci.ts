// `deno task bench:ci`: the short e2e check CI runs (well under 2 minutes). It
// measures scenarios (a) and (b) through the relay and direct, interleaved, and
// fails when the relay/direct throughput ratio of either drops below its floor,
// or when the server's CPU per chunk in (b), divided by the mock backend's in
// the same rounds, rises above its ceiling (bench/e2e/gate.ts: a ratio within
// one run, so it holds on slower and faster machines alike). The floors, the
// ceiling and why they are where they are: bench/README.md.
//
// `--mutant-us-per-chunk N` runs bench/e2e/mutant_server.ts instead of the
// server: N more µs of CPU per chunk. With N = the server's µs per chunk of a
// normal run (printed at the end), the gate must fail (bench/README.md).
import { parseArgs } from "node:util";
import { loadAvg, machineFacts } from "./e2e/machine.ts";
import { CEILING_SERVER_SHARE_B, cpuGate, serverShare } from "./e2e/gate.ts";
import { ROOT } from "../shell/procs.ts";
import { cpuTable, type Report, table, writeJson } from "./e2e/report.ts";
import { scenarioA, scenarioB, type ScenarioResult } from "./e2e/scenarios.ts";
import { setUp } from "./e2e/setup.ts";

/** Relay/direct throughput floors, from measurements on a 2-core machine (README). */
export const FLOOR_A = 0.55;
export const FLOOR_B = 0.35;
const { values: args } = parseArgs({
  args: Deno.args,
  options: { "mutant-us-per-chunk": { type: "string" } },
});
const mutantUs = args["mutant-us-per-chunk"];
if (mutantUs !== undefined && !(Number(mutantUs) > 0)) {
  console.error(`--mutant-us-per-chunk wants a positive number: ${mutantUs}`);
  Deno.exit(2);
}

const started = performance.now();
const machine = machineFacts();
const loadBefore = loadAvg();
const log = (line: string) => console.error(line);
const setup = await setUp({
  backendUrl: null,
  model: null,
  rounds: 5,
  withStamp: false,
  // CI stays fast and needs no nginx.
  nginx: false,
  workerMaxConcurrent: 256,
  ...(mutantUs === undefined ? {} : {
    serverEntry: "bench/e2e/mutant_server.ts",
    serverEnv: { BENCH_MUTANT_US_PER_CHUNK: mutantUs },
  }),
  log,
});
const results: ScenarioResult[] = [];
let error: unknown = null;
try {
  results.push(await scenarioA(setup.ctx, 20_000, FLOOR_A));
  results.push(await scenarioB(setup.ctx, 64, 500, FLOOR_B));
} catch (e) {
  error = e;
  console.error(`--- server output ---\n${setup.ctx.relayServer.proc.tail()}`);
} finally {
  await setup.teardown();
}
const report: Report = {
  command: "deno task bench:ci",
  mode: mutantUs === undefined
    ? "mock backend (ci)"
    : `mock backend (ci), mutant server +${mutantUs} µs a chunk`,
  backend: "mock/main.ts --delay-ms 0",
  machine,
  loadavg: { before: loadBefore, after: loadAvg() },
  nginx: setup.nginx,
  durationSecs: Math.round((performance.now() - started) / 1000),
  scenarios: results,
};
console.log(table(results));
console.log(
  `\nCPU µs per chunk, all rounds of each path:\n${cpuTable(results)}`,
);
console.log(
  `JSON: ${await writeJson(
    report,
    `${ROOT}bench/results`,
  )} (${report.durationSecs} s)`,
);
if (error !== null) {
  console.error(
    `bench:ci failed: ${error instanceof Error ? error.stack : error}`,
  );
  Deno.exit(1);
}
const low = results.flatMap((s) =>
  s.figures.filter((f) => f.met === false).map((f) =>
    `(${s.id}) ${f.metric}: relay/direct ${f.ratio} < floor (${f.target})`
  )
);
if (low.length > 0) {
  console.error(`bench:ci: throughput regression\n${low.join("\n")}`);
  Deno.exit(1);
}
for (const s of results) {
  const share = serverShare(s);
  if (share !== null) {
    console.log(
      `(${s.id}) server ${share.serverUs} µs a chunk, backend ${share.backendUs}: share ${share.share}`,
    );
  }
}
const gate = cpuGate(results);
if (!gate.ok) {
  console.error(`bench:ci: CPU regression: ${gate.reason}`);
  Deno.exit(1);
}
console.log(
  `bench:ci: relay/direct throughput above the floors; the server's CPU per chunk in (b) is ${gate.share.share} of the backend's (ceiling ${CEILING_SERVER_SHARE_B})`,
);
