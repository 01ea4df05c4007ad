// The random sweep: fast-check generates scenarios (arbitrary.ts) from one seed,
// runs each with runScenario, and on failure shrinks the scenario; fc.check (not
// fc.assert) so that we print our own report (conventions §7, §8).
import fc from "fast-check";
import { scenarioArb } from "./arbitrary.ts";
import { seed64 } from "./prng.ts";
import { type ReduceFn, type RunResult, runScenario } from "./run_scenario.ts";
import type { Scenario } from "./scenario.ts";
import { TraceHash } from "./trace.ts";

/** The fixed seed of the CI sweep (any run can override it with --seed). */
export const DEFAULT_SEED = "20260501";
/** Scenarios in the CI sweep (`deno task test`). */
export const DEFAULT_RUNS = 2_000;

export type SweepStats = {
  runs: number;
  events: number;
  checks: number;
  failures: number;
};

export type SweepFailure = {
  /** fast-check's replay path of the shrunk counterexample. */
  path: string;
  /** Runs until the first failure. */
  failedAtRun: number;
  shrinks: number;
  scenario: Scenario;
  runSeed: number;
  /** The shrunk scenario re-run with its full trace. */
  result: RunResult;
};

export type SweepReport = {
  stats: SweepStats;
  /** FNV-1a over the per-run trace hashes, in order. */
  hash: string;
  failure: SweepFailure | null;
};

export type SweepOptions = {
  seed: bigint;
  runs: number;
  /** Replays a counterexample path printed by an earlier failure. */
  path?: string;
  /** A mutant core (a fresh reducer per run). */
  makeReduce?: () => ReduceFn;
  /** Skip shrinking (mutant tests only need "caught"). */
  noShrink?: boolean;
  onProgress?: (stats: SweepStats) => void;
};

/** fast-check takes a 32-bit seed: ours folded down. */
export function fcSeed(seed: bigint): number {
  return Number(seed64(seed) & 0x7fff_ffffn);
}

export function sweep(o: SweepOptions): SweepReport {
  const stats: SweepStats = { runs: 0, events: 0, checks: 0, failures: 0 };
  const hash = new TraceHash();
  let failing = false;
  const property = fc.property(
    scenarioArb(),
    fc.integer({ min: 0, max: 0x7fff_ffff }),
    (scenario, runSeed) => {
      const opts = o.makeReduce === undefined ? {} : { reduce: o.makeReduce() };
      const r = runScenario(scenario, BigInt(runSeed), opts);
      if (!failing) {
        // Counted once per generated run; shrinking re-runs stay quiet.
        stats.runs++;
        stats.events += r.events;
        stats.checks += r.checks;
        hash.line(r.hash);
        if (!r.ok) {
          stats.failures++;
          failing = true;
        }
        o.onProgress?.(stats);
      }
      return r.ok;
    },
  );
  const params: fc.Parameters<[Scenario, number]> = {
    seed: fcSeed(o.seed),
    numRuns: o.runs,
    endOnFailure: o.noShrink === true,
  };
  if (o.path !== undefined) params.path = o.path;
  const details = fc.check(property, params);
  let failure: SweepFailure | null = null;
  if (details.failed && details.counterexample !== null) {
    const [scenario, runSeed] = details.counterexample;
    const opts = o.makeReduce === undefined
      ? { trace: true }
      : { trace: true, reduce: o.makeReduce() };
    failure = {
      path: details.counterexamplePath ?? "",
      failedAtRun: details.numRuns,
      shrinks: details.numShrinks,
      scenario,
      runSeed,
      result: runScenario(scenario, BigInt(runSeed), opts),
    };
  } else if (details.failed) {
    // The property threw: report it as is.
    throw details.errorInstance ??
      new Error("sweep failed without a counterexample");
  }
  return { stats, hash: hash.hex(), failure };
}
