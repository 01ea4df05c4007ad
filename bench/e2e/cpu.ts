// CPU accounting per process for the e2e harness (issue 18): the CPU time of
// every process involved, before and after each measured run, summed per path
// over all rounds and divided by the work done (chunks or requests). Read from
// /proc/<pid>/task/*/schedstat (nanoseconds on CPU per thread, summed over the
// process's threads) rather than utime + stime of /proc/<pid>/stat, whose 10 ms
// clock ticks could not tell 0.5 from 1.5 µs a chunk over a bench:ci run. A
// thread that exits mid-run takes its time with it; Deno's threads live as long
// as the process, so nothing measurable is lost.
import { assertNever } from "../../core/assert_never.ts";
import type { PathName } from "./client.ts";
import { readProc } from "./procs.ts";

/** The processes a request can cross; `loadgen` is the harness itself. */
export type Role =
  | "backend"
  | "server"
  | "worker"
  | "nginx"
  | "naive"
  | "base"
  | "loadgen";
export const ROLES: readonly Role[] = [
  "backend",
  "server",
  "worker",
  "nginx",
  "naive",
  "base",
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
    case "naive":
      return ["backend", "naive", "loadgen"];
    case "base":
      return ["backend", "base", "loadgen"];
    default:
      return assertNever(path);
  }
}

/** Pids per role; an empty list when the role has no process we can see (a real backend). */
export type CpuProcs = Record<Role, number[]>;

/**
 * CPU nanoseconds per pid: one `sh` sums the first field (time on CPU, ns) of
 * every thread's schedstat (proc(5)). One process for all pids, since Deno wants
 * --allow-all to read /proc/<pid> itself. A pid without threads prints nothing.
 */
export function readCpuNs(pids: readonly number[]): Map<number, number> {
  const out = new Map<number, number>();
  if (pids.length === 0) return out;
  const script = 'for p in "$@"; do s=0; found=0; ' +
    "for f in /proc/$p/task/*/schedstat; do " +
    '[ -r "$f" ] || continue; read a b c < "$f" && s=$((s + a)) && found=1; ' +
    'done; [ $found = 1 ] && echo "$p $s"; done; true';
  return parseCpuNs(shOverPids(script, pids));
}

/**
 * What one `sh` running `script` over `pids` (its "$@") prints: /proc is read
 * through `sh`, the one program test:core may run (`--allow-run=sh`).
 */
function shOverPids(script: string, pids: readonly number[]): string {
  const res = new Deno.Command("sh", {
    args: ["-c", script, "sh", ...pids.map(String)],
    stderr: "null",
  }).outputSync();
  return new TextDecoder().decode(res.stdout);
}

/** Parses readCpuNs's "pid ns" lines. */
export function parseCpuNs(text: string): Map<number, number> {
  const out = new Map<number, number>();
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    const [pid, ns] = line.trim().split(" ").map(Number);
    if (!Number.isInteger(pid) || !Number.isInteger(ns)) {
      throw new Error(`not a "pid ns" line: "${line}"`);
    }
    out.set(pid!, ns!);
  }
  return out;
}

/** A process's user and kernel time so far, in clock ticks, all threads. */
export type Ticks = { user: number; kernel: number };

/**
 * User and kernel ticks per pid from /proc/<pid>/stat, all in one `sh`
 * (shOverPids); a process that has exited is missing. Ticks are coarse (10
 * ms), so they serve to split a schedstat total into user and kernel time
 * over a whole run, not to time a request.
 */
export function readTicks(pids: readonly number[]): Map<number, Ticks> {
  const out = new Map<number, Ticks>();
  if (pids.length === 0) return out;
  const script =
    'for p in "$@"; do read -r l < /proc/$p/stat 2>/dev/null && echo "$l"; done; true';
  for (const line of shOverPids(script, pids).split("\n")) {
    if (line.trim() === "") continue;
    // A stat line starts with its pid (field 1).
    out.set(Number(line.slice(0, line.indexOf(" "))), parseStatTicks(line));
  }
  return out;
}

/**
 * utime and stime of one /proc/<pid>/stat line (proc(5) fields 14 and 15).
 * The command name (field 2) may hold spaces and parentheses, so the fields
 * are counted from its last ')'.
 */
export function parseStatTicks(stat: string): Ticks {
  const end = stat.lastIndexOf(")");
  const rest = end < 0 ? [] : stat.slice(end + 2).split(" ");
  // rest[0] is field 3 (state): utime is field 14, stime 15.
  const user = Number(rest[11]);
  const kernel = Number(rest[12]);
  if (!Number.isInteger(user) || !Number.isInteger(kernel)) {
    throw new Error(`not a /proc/<pid>/stat line: "${stat.slice(0, 80)}"`);
  }
  return { user, kernel };
}

/** CPU ns per role now; throws if a process has gone (its time would be lost). */
export function snapshot(procs: CpuProcs): Record<Role, number> {
  const ns = readCpuNs(ROLES.flatMap((r) => procs[r]));
  const out = zeroCpu();
  for (const role of ROLES) {
    for (const pid of procs[role]) {
      const t = ns.get(pid);
      if (t === undefined) {
        throw new Error(
          `${role} process ${pid} is gone (no /proc/${pid}/task)`,
        );
      }
      out[role] += t;
    }
  }
  return out;
}

export function zeroCpu(): Record<Role, number> {
  return {
    backend: 0,
    server: 0,
    worker: 0,
    nginx: 0,
    naive: 0,
    base: 0,
    loadgen: 0,
  };
}

/** Children of a process (Linux ≥ 3.5 with CONFIG_PROC_CHILDREN), e.g. nginx's workers. */
export function childPids(pid: number): number[] {
  const text = readProc(`/proc/${pid}/task/${pid}/children`);
  return text.trim().split(/\s+/).filter((s) => s !== "").map(Number);
}

/** What one path used over all measured rounds of a scenario. */
export type CpuTally = {
  /** Chunks or requests delivered over the rounds. */
  units: number;
  rounds: number;
  /** CPU nanoseconds per role over the rounds. */
  cpuNs: Record<Role, number>;
};

export type CpuFigure = {
  path: PathName;
  /** "chunk" or "request". */
  per: string;
  units: number;
  rounds: number;
  /** Raw CPU ns sums per role (all roles, on the path or not). */
  cpuNs: Record<Role, number>;
  /** µs of CPU per unit for the roles on the path; null for the others and for roles without a process. */
  usPerUnit: Record<Role, number | null>;
  /** Sum over the path's roles that have a process. */
  totalUsPerUnit: number;
};

/** Pure: CPU ns sums → µs per unit for the roles on `path`. */
export function cpuFigure(
  path: PathName,
  per: string,
  tally: CpuTally,
  procs: CpuProcs,
): CpuFigure {
  const usPerUnit: Record<Role, number | null> = {
    backend: null,
    server: null,
    worker: null,
    nginx: null,
    naive: null,
    base: null,
    loadgen: null,
  };
  let total = 0;
  for (const role of rolesOn(path)) {
    if (procs[role].length === 0) continue;
    const us = tally.cpuNs[role] / 1000 / tally.units;
    usPerUnit[role] = Math.round(us * 100) / 100;
    total += us;
  }
  return {
    path,
    per,
    units: tally.units,
    rounds: tally.rounds,
    cpuNs: { ...tally.cpuNs },
    usPerUnit,
    totalUsPerUnit: Math.round(total * 100) / 100,
  };
}
