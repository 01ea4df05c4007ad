// `deno task sim`: run one named scenario, or a random sweep.
//   deno task sim --scenario NAME [--seed N]
//   deno task sim --runs N [--seed N] [--path P] [--mutant NAME]
//   deno task sim --list
// The seed is a decimal integer or a 40-hex git SHA. The seed and parameters are
// printed first; the only wall-clock read in sim/ is here, for events/s, and it
// is never fed back into a run.
import { parseArgs } from "node:util";
import { type Mutant, MUTANTS } from "./mutants.ts";
import { parseSeed } from "./prng.ts";
import { formatFailure } from "./report.ts";
import { type RunResult, runScenario } from "./run_scenario.ts";
import { SCENARIOS } from "./scenarios/mod.ts";
import { DEFAULT_SEED, sweep } from "./sweep.ts";
import { swarmOf } from "./arbitrary.ts";
import { INVARIANTS } from "./observer/mod.ts";

function usage(): string {
  return [
    "usage: deno task sim --scenario NAME [--seed N]",
    "       deno task sim --runs N [--seed N] [--path P] [--mutant NAME] [--full]",
    "       deno task sim --list",
    `scenarios: ${[...SCENARIOS.keys()].join(", ")}`,
    `mutants: ${MUTANTS.map((m) => m.name).join(", ")}`,
  ].join("\n");
}

function write(text: string): void {
  Deno.stdout.writeSync(new TextEncoder().encode(text));
}

function rate(events: number, ms: number): string {
  return ms <= 0
    ? "n/a"
    : Math.round(events / (ms / 1000)).toLocaleString("en-US");
}

function main(argv: string[]): number {
  let args;
  try {
    args = parseArgs({
      args: argv,
      options: {
        scenario: { type: "string" },
        seed: { type: "string", default: DEFAULT_SEED },
        runs: { type: "string" },
        path: { type: "string" },
        mutant: { type: "string" },
        full: { type: "boolean", default: false },
        list: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
    }).values;
  } catch (err) {
    console.error(String(err instanceof Error ? err.message : err));
    console.error(usage());
    return 2;
  }
  if (args.help) {
    console.log(usage());
    return 0;
  }
  if (args.list) return list();
  const seedText = args.seed;
  const seed = parseSeed(seedText);
  if (seed === null) {
    console.error(
      `--seed must be a decimal integer or a 40-hex git SHA, got "${seedText}"`,
    );
    return 2;
  }
  const mutant = args.mutant === undefined
    ? undefined
    : MUTANTS.find((m) => m.name === args.mutant);
  if (args.mutant !== undefined && mutant === undefined) {
    console.error(`unknown mutant "${args.mutant}"\n${usage()}`);
    return 2;
  }
  const run: RunArgs = { seed, seedText, mutant, full: args.full };
  if (args.scenario !== undefined) return runNamed(args.scenario, run);
  if (args.runs === undefined) {
    console.error(usage());
    return 2;
  }
  return runSweep(args.runs, args.path, run);
}

/** What both ways of running share: the seed (and its text), the mutant, how much trace to print. */
type RunArgs = {
  seed: bigint;
  seedText: string;
  mutant: Mutant | undefined;
  full: boolean;
};

function list(): number {
  console.log("scenarios:");
  for (const name of SCENARIOS.keys()) console.log(`  ${name}`);
  console.log("invariants:");
  for (const [name, text] of Object.entries(INVARIANTS)) {
    console.log(`  ${name}: ${text}`);
  }
  console.log("mutants:");
  for (const m of MUTANTS) console.log(`  ${m.name}: breaks ${m.breaks}`);
  return 0;
}

/** `--scenario NAME`: one named scenario, its figures, and the failure report if it fails. */
function runNamed(name: string, a: RunArgs): number {
  const { seed, seedText, mutant } = a;
  const mutantFlag = mutant === undefined ? "" : ` --mutant ${mutant.name}`;
  const scenario = SCENARIOS.get(name);
  if (scenario === undefined) {
    console.error(`unknown scenario "${name}"\n${usage()}`);
    return 2;
  }
  console.log(`SEED=${seedText} scenario=${scenario.name}${mutantFlag}`);
  const t0 = performance.now();
  const opts = mutant === undefined ? {} : { reduce: mutant.make() };
  const r = runScenario(scenario, seed, opts);
  const ms = performance.now() - t0;
  console.log(
    `events ${r.events}, invariant checks ${r.checks}, virtual time ${r.atMs} ms, ${
      rate(r.events, ms)
    } events/s`,
  );
  console.log(`trace hash ${r.hash}`);
  printFigures(r);
  if (r.ok) return 0;
  const traced = runScenario(
    scenario,
    seed,
    mutant === undefined
      ? { trace: true }
      : { trace: true, reduce: mutant.make() },
  );
  console.log(formatFailure(traced, {
    seed: seedText,
    scenario,
    runSeed: seedText,
    full: a.full,
    replay:
      `deno task sim --scenario ${scenario.name} --seed ${seedText}${mutantFlag}`,
  }));
  return 1;
}

/** Scheduling and lifecycle figures of one run. */
function printFigures(r: RunResult): void {
  const d = r.sched.dispatched;
  console.log(
    `scheduling: dispatched high ${d.high} / normal ${d.normal} / low ${d.low}, low while high waited ${r.sched.lowWhileHighWaits}, longest low wait ${r.sched.maxLowWait} dispatches, most tenants served ahead of a waiting one ${r.sched.maxOthersAhead}, admitted ${r.sched.admitted}, 429 ${r.sched.rateLimited}, affinity hits ${r.sched.affinityHits}`,
  );
  if (r.sched.maxWaitByTenant.size > 1) {
    console.log(
      `longest wait per tenant (dispatches): ${
        [...r.sched.maxWaitByTenant].map(([t, n]) => `${t} ${n}`).join(", ")
      }`,
    );
  }
  if (r.lifecycle.tasks > 0) {
    const l = r.lifecycle;
    console.log(
      `lifecycle: tasks ${l.tasks} (sent to ${l.sent} worker(s)), completed ${l.completed}, failed ${l.failed} (refused ${l.refused}, timed-out parts ${l.timedOut}, parts lost with their worker ${l.workerLeft})`,
    );
  }
}

/** `--runs N`: a seeded sweep of random scenarios, with progress, summary and the shrunk failure. */
function runSweep(
  runsText: string,
  path: string | undefined,
  a: RunArgs,
): number {
  const { seed, seedText, mutant } = a;
  const mutantFlag = mutant === undefined ? "" : ` --mutant ${mutant.name}`;
  const runs = Number(runsText);
  if (!Number.isInteger(runs) || runs < 1) {
    console.error(`--runs must be a positive integer, got "${runsText}"`);
    return 2;
  }
  console.log(
    `SEED=${seedText} runs=${runs}${
      path === undefined ? "" : ` path=${path}`
    }${mutantFlag}`,
  );
  const t0 = performance.now();
  const every = Math.max(1, Math.floor(runs / 50));
  const report = sweep({
    seed,
    runs,
    ...(path === undefined ? {} : { path }),
    ...(mutant === undefined ? {} : { makeReduce: mutant.make }),
    onProgress: (s) => {
      if (s.runs % every !== 0 && s.failures === 0) return;
      write(
        `\rruns ${s.runs}/${runs}  events ${s.events}  checks ${s.checks}  failures ${s.failures}  ${
          rate(s.events, performance.now() - t0)
        } events/s`,
      );
    },
  });
  const ms = performance.now() - t0;
  const s = report.stats;
  write("\n");
  console.log(
    `summary: runs ${s.runs}, events ${s.events}, invariant checks ${s.checks}, failures ${s.failures}, ${
      rate(s.events, ms)
    } events/s, ${(ms / 1000).toFixed(1)} s`,
  );
  console.log(`sweep hash ${report.hash}`);
  const f = report.failure;
  if (f === null) return s.failures === 0 ? 0 : 1;
  console.log(formatFailure(f.result, {
    seed: seedText,
    scenario: f.scenario,
    runSeed: String(f.runSeed),
    full: a.full,
    extra: [
      `failed at run ${f.failedAtRun}, shrunk ${f.shrinks} times, fast-check path ${f.path}`,
      `swarm: ${swarmOf(f.scenario).join(",") || "(no faults)"}`,
    ],
    replay:
      `deno task sim --runs ${runs} --seed ${seedText} --path ${f.path}${mutantFlag}`,
  }));
  return 1;
}

Deno.exit(main(Deno.args));
