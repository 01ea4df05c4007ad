// The terminal tables and the JSON file of an e2e run: one table of figures
// (relay and nginx each beside direct) and one of CPU per unit per process.
import { assertNever } from "../../core/assert_never.ts";
import { ROLES, rolesOn } from "./cpu.ts";
import type { MachineFacts } from "./machine.ts";
import type { Figure, ScenarioResult } from "./scenarios.ts";
import type { NginxStatus } from "./setup.ts";

export type Report = {
  command: string;
  mode: string;
  backend: string;
  machine: MachineFacts;
  /** /proc/loadavg before and after: other work on the machine moves every figure. */
  loadavg: { before: string; after: string };
  nginx: NginxStatus;
  durationSecs: number;
  scenarios: ScenarioResult[];
};

export function fmt(n: number | null | undefined): string {
  if (n === null || n === undefined) return "";
  if (!Number.isFinite(n)) return String(n);
  const abs = Math.abs(n);
  if (abs >= 1000) return Math.round(n).toLocaleString("en-US");
  if (abs >= 100) return n.toFixed(1);
  return n.toFixed(abs >= 10 ? 2 : 3);
}

/** CPU µs: 3 significant digits; the run-to-run spread is wider than that. */
function fmtUs(n: number): string {
  if (n >= 100) return Math.round(n).toLocaleString("en-US");
  return n.toFixed(n >= 10 ? 1 : 2);
}

/** "0.592" for a ratio, "+1.23" for an added latency, "" when there is neither. */
function versus(ratio: number | undefined, added: number | undefined): string {
  if (ratio !== undefined) return ratio.toFixed(3);
  if (added !== undefined) return (added >= 0 ? "+" : "") + fmt(added);
  return "";
}

/**
 * A markdown table; columns listed in `right` are right-aligned, and columns
 * empty in every row but the header are left out (bench:ci has no nginx).
 */
export function markdown(
  all: string[][],
  rightAll: ReadonlySet<number>,
): string {
  const keep = all[0]!.map((_, i) => i).filter((i) =>
    all.slice(1).some((r) => r[i] !== "")
  );
  const rows = all.map((r) => keep.map((i) => r[i]!));
  const right = new Set(
    keep.flatMap((col, i) => rightAll.has(col) ? [i] : []),
  );
  const widths = rows[0]!.map((_, i) =>
    Math.max(...rows.map((r) => r[i]!.length))
  );
  const line = (r: string[]) =>
    "| " +
    r.map((c, i) =>
      right.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)
    ).join(" | ") +
    " |";
  const sep = "|" +
    widths.map((w, i) =>
      right.has(i) ? "-".repeat(w + 1) + ":" : "-".repeat(w + 2)
    ).join("|") + "|";
  return [line(rows[0]!), sep, ...rows.slice(1).map(line)].join("\n");
}

function figureRow(id: string, f: Figure): string[] {
  return [
    `(${id})`,
    f.metric,
    f.unit,
    fmt(f.relay),
    fmt(f.direct),
    fmt(f.nginx),
    fmt(f.naive),
    fmt(f.base),
    versus(f.ratio, f.added),
    versus(f.nginxRatio, f.nginxAdded),
    versus(f.naiveRatio, f.naiveAdded),
    versus(f.baseRatio, f.baseAdded),
    f.target ?? "",
    f.met === undefined ? "" : f.met ? "yes" : "NO",
  ];
}

/**
 * The figures: scenario titles as a legend, then one row per figure. "vs
 * direct" is the ratio for throughput and the added ms for latency; target
 * and met are the issue's, for the relay.
 */
export function table(scenarios: ScenarioResult[]): string {
  const legend = scenarios.map((s) => `(${s.id}) ${s.title}`).join("\n");
  const rows: string[][] = [[
    "",
    "metric",
    "unit",
    "relay",
    "direct",
    "nginx",
    "naive",
    "base",
    "relay vs direct",
    "nginx vs direct",
    "naive vs direct",
    "base vs direct",
    "target",
    "met",
  ]];
  for (const s of scenarios) {
    for (const f of s.figures) rows.push(figureRow(s.id, f));
  }
  return `${legend}\n\n${
    markdown(rows, new Set([3, 4, 5, 6, 7, 8, 9, 10, 11]))
  }`;
}

/**
 * CPU µs per chunk or request of each process on each path, over all measured
 * rounds. Blank: the process is not on that path; n/a: on it but not ours to
 * measure (a real backend).
 */
export function cpuTable(scenarios: ScenarioResult[]): string {
  const rows: string[][] = [[
    "",
    "path",
    "µs per",
    ...ROLES,
    "total",
    "cpu ms",
  ]];
  for (const s of scenarios) {
    for (const f of s.cpu ?? []) {
      const on = new Set(rolesOn(f.path));
      const totalNs = [...on].reduce((n, r) => n + f.cpuNs[r], 0);
      rows.push([
        `(${s.id})`,
        f.path,
        f.per,
        ...ROLES.map((r) => {
          if (!on.has(r)) return "";
          const us = f.usPerUnit[r];
          return us === null ? "n/a" : fmtUs(us);
        }),
        fmtUs(f.totalUsPerUnit),
        fmtUs(totalNs / 1e6),
      ]);
    }
  }
  if (rows.length === 1) return "";
  const right = new Set(rows[0]!.map((_, i) => i).filter((i) => i >= 3));
  return markdown(rows, right);
}

export function nginxLine(status: NginxStatus): string {
  switch (status.kind) {
    case "running":
      return `nginx: ${status.binary} (generated config in the JSON)`;
    case "skipped":
      return `nginx: skipped (${status.reason})`;
    default:
      return assertNever(status);
  }
}

export async function writeJson(report: Report, dir: string): Promise<string> {
  await Deno.mkdir(dir, { recursive: true });
  const stamp = report.machine.date.replace(/[:.]/g, "-").slice(0, 19);
  const kind = report.command.includes("bench:ci") ? "ci" : "e2e";
  const path = `${dir}/${kind}-${stamp}.json`;
  await Deno.writeTextFile(path, JSON.stringify(report, null, 2) + "\n");
  return path;
}
