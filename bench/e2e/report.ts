// The terminal table and the JSON file of an e2e run.
import type { MachineFacts } from "./machine.ts";
import type { ScenarioResult } from "./scenarios.ts";

export type Report = {
  command: string;
  mode: string;
  backend: string;
  machine: MachineFacts;
  durationSecs: number;
  scenarios: ScenarioResult[];
};

function fmt(n: number | null | undefined): string {
  if (n === null || n === undefined) return "";
  if (!Number.isFinite(n)) return String(n);
  const abs = Math.abs(n);
  if (abs >= 1000) return Math.round(n).toLocaleString("en-US");
  if (abs >= 100) return n.toFixed(1);
  return n.toFixed(abs >= 10 ? 2 : 3);
}

export function table(scenarios: ScenarioResult[]): string {
  const rows: string[][] = [[
    "scenario",
    "metric",
    "unit",
    "relay",
    "direct",
    "relay/direct",
    "added",
    "target",
    "met",
  ]];
  for (const s of scenarios) {
    for (const f of s.figures) {
      rows.push([
        `(${s.id}) ${s.title}`,
        f.metric,
        f.unit,
        fmt(f.relay),
        fmt(f.direct),
        f.ratio === undefined ? "" : f.ratio.toFixed(3),
        f.added === undefined ? "" : fmt(f.added),
        f.target ?? "",
        f.met === undefined ? "" : f.met ? "yes" : "NO",
      ]);
    }
  }
  const widths = rows[0]!.map((_, i) =>
    Math.max(...rows.map((r) => r[i]!.length))
  );
  const line = (r: string[]) =>
    "| " +
    r.map((
      c,
      i,
    ) => (i >= 3 && i <= 6 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join(" | ") +
    " |";
  const sep = "|" +
    widths.map((
      w,
      i,
    ) => (i >= 3 && i <= 6 ? "-".repeat(w + 1) + ":" : "-".repeat(w + 2))).join(
      "|",
    ) + "|";
  return [line(rows[0]!), sep, ...rows.slice(1).map(line)].join("\n");
}

export async function writeJson(report: Report, dir: string): Promise<string> {
  await Deno.mkdir(dir, { recursive: true });
  const stamp = report.machine.date.replace(/[:.]/g, "-").slice(0, 19);
  const kind = report.command.includes("bench:ci") ? "ci" : "e2e";
  const path = `${dir}/${kind}-${stamp}.json`;
  await Deno.writeTextFile(path, JSON.stringify(report, null, 2) + "\n");
  return path;
}
