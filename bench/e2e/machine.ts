// Machine facts recorded next to every e2e figure (issue 10: figures without the
// machine they came from mean little).
import { readProc } from "./procs.ts";

export type MachineFacts = {
  date: string;
  cpuModel: string;
  cores: number;
  memoryGiB: number;
  os: string;
  deno: string;
  v8: string;
};

export function machineFacts(): MachineFacts {
  let cpuModel = "unknown";
  try {
    const info = readProc("/proc/cpuinfo");
    cpuModel = /^model name\s*:\s*(.+)$/m.exec(info)?.[1]?.trim() ?? cpuModel;
  } catch {
    // Not Linux: leave it unknown.
  }
  let memoryGiB = NaN;
  try {
    memoryGiB = Math.round(Deno.systemMemoryInfo().total / 2 ** 30 * 10) / 10;
  } catch {
    // --allow-sys missing: leave it unknown.
  }
  let os: string = Deno.build.os;
  try {
    os = `${Deno.build.os} ${Deno.osRelease()} ${Deno.build.arch}`;
  } catch {
    // Keep the short form.
  }
  return {
    date: new Date().toISOString(),
    cpuModel,
    cores: navigator.hardwareConcurrency,
    memoryGiB,
    os,
    deno: Deno.version.deno,
    v8: Deno.version.v8,
  };
}

/** /proc/loadavg ("1.02 0.87 0.65 2/311 12345"), or "unknown" off Linux. */
export function loadAvg(): string {
  try {
    return readProc("/proc/loadavg").trim();
  } catch {
    return "unknown";
  }
}
