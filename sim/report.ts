// Failure reports: the seed first, the violated invariant by name and checklist
// number, the step and event, the (shrunk) scenario as builder calls ready to
// pin as a regression, its event list and the one command that replays it
// (conventions §7).
import type { RunResult } from "./run_scenario.ts";
import type { Scenario } from "./scenario.ts";
import { scenarioSource } from "./scenario_source.ts";

export type FailureContext = {
  seed: string;
  scenario: Scenario;
  runSeed: string;
  replay: string;
  /** Print every trace line instead of the tail. */
  full: boolean;
  extra?: string[];
};

const TAIL_LINES = 120;

export function formatFailure(r: RunResult, c: FailureContext): string {
  const v = r.violation;
  const lines = [
    `FAILED seed=${c.seed} scenario=${c.scenario.name} run-seed=${c.runSeed}`,
    `invariant: ${v?.name ?? "?"} (${v?.contract ?? "?"})`,
    `  ${v?.message ?? ""}`,
    `at step ${r.step}, virtual time ${r.atMs} ms, event: ${
      r.failingEvent ?? "?"
    }`,
    `trace hash: ${r.hash}`,
    ...(c.extra ?? []),
    "scenario, as builder calls (paste into sim/scenarios/regressions.ts):",
    scenarioSource(c.scenario, "regression"),
  ];
  const t = r.trace;
  if (t.length > 0) {
    const shown = c.full || t.length <= TAIL_LINES
      ? t
      : t.slice(t.length - TAIL_LINES);
    lines.push(
      shown.length === t.length
        ? `event list (${t.length} lines):`
        : `event list, last ${shown.length} of ${t.length} lines (add --full for all):`,
      ...shown,
    );
  }
  lines.push(`replay: ${c.replay}`);
  return lines.join("\n");
}
