// CPU accounting per process for the e2e harness (issue 18): utime + stime of
// every process involved, from /proc/<pid>/stat, before and after each measured
// run, summed per path over all rounds and divided by the work done (chunks or
// requests). The kernel counts in clock ticks (10 ms at CLK_TCK 100), so a
// single run is too short to resolve; the sums over rounds are what is reported,
// with the raw tick counts kept in the JSON so a reader can judge the resolution.
import { assertNever } from "../../core/assert_never.ts";
import type { PathName } from "./client.ts";
import { readProc, readProcs } from "./procs.ts";

/** The processes a request can cross; `loadgen` is the harness itself. */
export type Role = "backend" | "server" | "worker" | "nginx" | "loadgen";
export const ROLES: readonly Role[] = [
  "backend",
  "server",
  "worker",
  "nginx",
  "loadgen",
];

/**
 * The processes a path's requests actually cross. The others are measured too
 * (idle cost shows up there) but are not part of the path's figure.
 */
export function rolesOn(path: PathName): readonly Role[] {
  switch (path) {
    case "relay":
      return ["backend", "server", "worker", "loadgen"];
    case "direct":
      return ["backend", "loadgen"];
    case "nginx":
      return ["backend", "nginx", "loadgen"];
    default:
      return assertNever(path);
  }
}

/** Pids per role; an empty list when the role has no process we can see (a real backend). */
export type CpuProcs = Record<Role, number[]>;

export type ProcStat = { pid: number; ppid: number; ticks: number };

/**
 * Parses one /proc/<pid>/stat line. The command name (field 2) sits in
 * parentheses and may itself hold spaces or parentheses, so fields are counted
 * after the last ')': state is field 3, ppid 4, utime 14, stime 15 (proc(5)).
 */
export function parseStat(line: string): ProcStat {
  const close = line.lastIndexOf(")");
  if (close === -1) throw new Error(`not a /proc/<pid>/stat line: "${line}"`);
  const pid = Number(line.slice(0, line.indexOf(" ")));
  const rest = line.slice(close + 2).split(" ");
  const ppid = Number(rest[1]);
  const utime = Number(rest[11]);
  const stime = Number(rest[12]);
  if (![pid, ppid, utime, stime].every(Number.isInteger)) {
    throw new Error(`not a /proc/<pid>/stat line: "${line}"`);
  }
  return { pid, ppid, ticks: utime + stime };
}

/** utime + stime per pid; one `cat` for all (Deno wants --allow-all to read /proc/<pid> itself). */
export function readTicks(pids: readonly number[]): Map<number, number> {
  const out = new Map<number, number>();
  if (pids.length === 0) return out;
  const text = readProcs(pids.map((p) => `/proc/${p}/stat`));
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const s = parseStat(line);
    out.set(s.pid, s.ticks);
  }
  return out;
}

/** Ticks per role now; throws if a process has gone (its ticks would be lost). */
export function snapshot(procs: CpuProcs): Record<Role, number> {
  const ticks = readTicks(ROLES.flatMap((r) => procs[r]));
  const out = zeroTicks();
  for (const role of ROLES) {
    for (const pid of procs[role]) {
      const t = ticks.get(pid);
      if (t === undefined) {
        throw new Error(
          `${role} process ${pid} is gone (no /proc/${pid}/stat)`,
        );
      }
      out[role] += t;
    }
  }
  return out;
}

export function zeroTicks(): Record<Role, number> {
  return { backend: 0, server: 0, worker: 0, nginx: 0, loadgen: 0 };
}

/** Children of a process (Linux ≥ 3.5 with CONFIG_PROC_CHILDREN), e.g. nginx's workers. */
export function childPids(pid: number): number[] {
  const text = readProc(`/proc/${pid}/task/${pid}/children`);
  return text.trim().split(/\s+/).filter((s) => s !== "").map(Number);
}

let clkTck: number | null = null;

/** `getconf CLK_TCK` (100 on Linux x86_64), read once. */
export function clockTicksPerSec(): number {
  if (clkTck !== null) return clkTck;
  try {
    const out = new Deno.Command("getconf", { args: ["CLK_TCK"] })
      .outputSync();
    const n = Number(new TextDecoder().decode(out.stdout).trim());
    clkTck = Number.isInteger(n) && n > 0 ? n : 100;
  } catch {
    clkTck = 100;
  }
  return clkTck;
}

/** What one path used over all measured rounds of a scenario. */
export type CpuTally = {
  /** Chunks or requests delivered over the rounds. */
  units: number;
  rounds: number;
  ticks: Record<Role, number>;
};

export type CpuFigure = {
  path: PathName;
  /** "chunk" or "request". */
  per: string;
  units: number;
  rounds: number;
  /** Raw tick sums per role (all roles, on the path or not). */
  ticks: Record<Role, number>;
  /** µs of CPU per unit for the roles on the path; null for the others and for roles without a process. */
  usPerUnit: Record<Role, number | null>;
  /** Sum over the path's roles that have a process. */
  totalUsPerUnit: number;
};

/** Pure: tick sums → µs per unit for the roles on `path`. */
export function cpuFigure(
  path: PathName,
  per: string,
  tally: CpuTally,
  procs: CpuProcs,
  ticksPerSec: number,
): CpuFigure {
  const usPerUnit: Record<Role, number | null> = {
    backend: null,
    server: null,
    worker: null,
    nginx: null,
    loadgen: null,
  };
  let total = 0;
  for (const role of rolesOn(path)) {
    if (procs[role].length === 0) continue;
    const us = tally.ticks[role] * 1e6 / ticksPerSec / tally.units;
    usPerUnit[role] = Math.round(us * 100) / 100;
    total += us;
  }
  return {
    path,
    per,
    units: tally.units,
    rounds: tally.rounds,
    ticks: { ...tally.ticks },
    usPerUnit,
    totalUsPerUnit: Math.round(total * 100) / 100,
  };
}
