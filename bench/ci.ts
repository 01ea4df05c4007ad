// `deno task bench:ci`: the short e2e check CI runs (well under 2 minutes). It
// measures scenarios (a) and (b) through the relay and direct, interleaved, and
// fails when the relay/direct throughput ratio of either drops below its floor,
// or when the server's CPU per chunk in (a) rises above its ceiling (a CPU
// figure moves far less with the machine's load than a throughput ratio, so it
// can sit close to what the code costs). The floors, the ceiling and why they
// are where they are: bench/README.md.
import { loadAvg, machineFacts } from "./e2e/machine.ts";
import { ROOT } from "../shell/procs.ts";
import { cpuTable, type Report, table, writeJson } from "./e2e/report.ts";
import { scenarioA, scenarioB, type ScenarioResult } from "./e2e/scenarios.ts";
import { setUp } from "./e2e/setup.ts";

/** Relay/direct throughput floors, from measurements on a 2-core machine (README). */
export const FLOOR_A = 0.55;
export const FLOOR_B = 0.35;
/**
 * The server's CPU per chunk in (a), µs: 0.57–0.85 with chunk-bytes-v1,
 * 1.25–1.84 with JSON text frames (README). Above it, a chunk costs the server
 * a parse or an encoding again.
 */
export const CEILING_SERVER_US_A = 1.1;

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
  mode: "mock backend (ci)",
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
const serverUs =
  results.find((s) => s.id === "a")?.cpu?.find((f) => f.path === "relay")
    ?.usPerUnit.server ?? null;
if (serverUs === null || serverUs > CEILING_SERVER_US_A) {
  console.error(
    `bench:ci: CPU regression: the server spent ${serverUs} µs a chunk in (a), ceiling ${CEILING_SERVER_US_A}`,
  );
  Deno.exit(1);
}
console.log(
  `bench:ci: relay/direct throughput above the floors, server ${serverUs} µs a chunk in (a) (ceiling ${CEILING_SERVER_US_A})`,
);
