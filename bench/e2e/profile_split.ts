// Splits a V8 .cpuprofile (from `bench:e2e --cpu-prof`) of the relay server or
// worker into the hop's stages (issue 31, "measure before cutting"): parse,
// decide, frame, write, ledger, trace, and the runtime's own share. Each
// sample goes to the first stage that its stack names, looked up from the
// leaf towards the root, so time spent in Node-compat internals (events,
// streams) is charged to the stage of ours that called them.
//   deno run --allow-read bench/e2e/profile_split.ts <file.cpuprofile> [units]
// With `units` (requests or chunks the run carried) it also prints µs of
// sampled time per unit. Sampled time is wall time on the main thread, not
// CPU time: on a loaded machine a thread preempted inside a syscall (a
// loopback write wakes its reader) is sampled there, so read the split as
// shares and the CPU table of bench:e2e for the absolute figure.
//
// It also prints whose code the time is in (`splitByOwner`): each sample by
// its leaf alone, with no charging up the stack. A builtin our code calls
// (JSON.parse, a string method) has no frame of its own in a V8 profile, so
// it counts as ours; an op (`op_write`, node's `writeUtf8String`) is the
// runtime's. Issue 31 reads it as the most a cut of our own code could take.

type CallFrame = { functionName: string; url: string; lineNumber?: number };
type Node = { id: number; callFrame: CallFrame; children?: number[] };
type Profile = { nodes: Node[]; samples: number[]; timeDeltas: number[] };

export type Stage =
  | "parse"
  | "decide"
  | "frame"
  | "write"
  | "ledger"
  | "trace"
  | "timers"
  | "shell"
  | "runtime"
  | "gc"
  | "startup";

export const STAGES: readonly Stage[] = [
  "parse",
  "decide",
  "frame",
  "write",
  "ledger",
  "trace",
  "timers",
  "shell",
  "runtime",
  "gc",
  "startup",
];

/** The stage one frame names, or null when it says nothing on its own. */
export function stageOf(f: CallFrame): Stage | null {
  const fn = f.functionName;
  const url = f.url;
  if (fn === "(garbage collector)") return "gc";
  // Syscalls and the stream machinery that leads to them.
  if (/^(writev|writeUtf8String|writeBuffer|writeLatin1String)$/.test(fn)) {
    return "write";
  }
  if (/internal\/streams\/writable|stream_base_commons/.test(url)) {
    return "write";
  }
  if (/usage_ledger|usage_merge|shell\/worker\/usage\.ts/.test(url)) {
    return "ledger";
  }
  if (/ops\/tracing|ops\/metrics|traceparent|trace_ids/.test(url)) {
    return "trace";
  }
  if (/core\/protocol\/(encode|frame_limit)|ws\/.*\/sender\.js/.test(url)) {
    return "frame";
  }
  if (
    /core\/protocol\/decode|ws\/.*\/receiver\.js|zod|_http_common|_http_incoming|http1\/(response_parser|header_lines)|http\/(body|model_of)\.ts/
      .test(url) ||
    fn === "parserOnIncoming" || fn === "parserOnHeadersComplete" ||
    fn === "parserOnBody" || fn === "parserOnMessageComplete" ||
    fn === "JSON.parse" || fn === "parse"
  ) {
    return "parse";
  }
  if (/_http_outgoing|_http_server|http1\/(exchange|request_head)/.test(url)) {
    return "write";
  }
  if (/\/core\//.test(url) && !/ext:core/.test(url)) return "decide";
  if (/internal\/timers|\/timers\.ts|worker\/deadlines\.ts/.test(url)) {
    return "timers";
  }
  if (/\/shell\//.test(url)) return "shell";
  return null;
}

/**
 * Module loading and top-level evaluation: the process's start, not a
 * request's cost (left out of the busy total).
 */
function isStartup(f: CallFrame & { lineNumber?: number }): boolean {
  return (f.functionName === "" && f.lineNumber === 0 && f.url !== "") ||
    /^(loadExtScript|lazyLoad|op_load_ext_script|op_lazy_load_esm)$/.test(
      f.functionName,
    ) || f.functionName === "Module._load";
}

type Tree = {
  byId: Map<number, Node>;
  parent: Map<number, number>;
  /** Whether a node is module loading or top-level evaluation, or below it. */
  underStartup: (id: number) => boolean;
};

function tree(p: Profile): Tree {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) {
    for (const c of n.children ?? []) parent.set(c, n.id);
  }
  const startup = new Map<number, boolean>();
  const underStartup = (id: number): boolean => {
    const known = startup.get(id);
    if (known !== undefined) return known;
    const up = parent.get(id);
    const s = isStartup(byId.get(id)!.callFrame) ||
      (up !== undefined && underStartup(up));
    startup.set(id, s);
    return s;
  };
  return { byId, parent, underStartup };
}

export type Owner =
  | "ours"
  | "runtime ops"
  | "runtime JS"
  | "packages"
  | "gc"
  | "program";

export const OWNERS: readonly Owner[] = [
  "ours",
  "runtime ops",
  "runtime JS",
  "packages",
  "gc",
  "program",
];

/** Whose code one frame is: ours, the runtime's (ops, its JS), a package's. */
export function ownerOf(f: CallFrame): Owner {
  const fn = f.functionName;
  if (fn === "(garbage collector)") return "gc";
  if (fn === "(program)" || fn === "(root)") return "program";
  // A regular expression's compiled code runs for its caller, as a builtin.
  if (fn.startsWith("RegExp: ")) return "ours";
  // Natives without a script: Deno's ops and node-compat's stream writes.
  if (f.url === "") return "runtime ops";
  if (/^(ext|node):/.test(f.url)) return "runtime JS";
  if (/^npm:|\/(npm|node_modules)\//.test(f.url)) return "packages";
  return "ours";
}

/** Busy time (idle and startup left out) by the owner of each sample's leaf. */
export function splitByOwner(p: Profile): Map<Owner, number> {
  const { byId, underStartup } = tree(p);
  const out = new Map<Owner, number>(OWNERS.map((o) => [o, 0]));
  for (let i = 0; i < p.samples.length; i++) {
    const node = byId.get(p.samples[i]!)!;
    if (node.callFrame.functionName === "(idle)") continue;
    if (underStartup(node.id)) continue;
    const o = ownerOf(node.callFrame);
    out.set(o, out.get(o)! + (p.timeDeltas[i] ?? 0));
  }
  return out;
}

export function split(p: Profile): Map<Stage, number> {
  const { byId, parent, underStartup } = tree(p);
  const stageById = new Map<number, Stage>();
  const resolve = (id: number): Stage => {
    const known = stageById.get(id);
    if (known !== undefined) return known;
    if (underStartup(id)) {
      stageById.set(id, "startup");
      return "startup";
    }
    const own = stageOf(byId.get(id)!.callFrame);
    const up = parent.get(id);
    const s = own ?? (up === undefined ? "runtime" : resolve(up));
    stageById.set(id, s);
    return s;
  };
  const out = new Map<Stage, number>(STAGES.map((s) => [s, 0]));
  for (let i = 0; i < p.samples.length; i++) {
    const node = byId.get(p.samples[i]!)!;
    if (node.callFrame.functionName === "(idle)") continue;
    const s = resolve(node.id);
    out.set(s, out.get(s)! + (p.timeDeltas[i] ?? 0));
  }
  return out;
}

if (import.meta.main) {
  const [file, unitsArg] = Deno.args;
  if (file === undefined) {
    console.error("usage: profile_split.ts <file.cpuprofile> [units]");
    Deno.exit(2);
  }
  const units = unitsArg === undefined ? null : Number(unitsArg);
  const p = JSON.parse(Deno.readTextFileSync(file)) as Profile;
  const stages = split(p);
  const busy = [...stages].reduce(
    (a, [s, us]) => s === "startup" ? a : a + us,
    0,
  );
  console.log(
    `busy (sampled, not idle, startup left out): ${
      (busy / 1000).toFixed(0)
    } ms; startup ${(stages.get("startup")! / 1000).toFixed(0)} ms`,
  );
  for (const s of STAGES) {
    if (s === "startup") continue;
    const us = stages.get(s)!;
    const per = units === null ? "" : `  ${(us / units).toFixed(2)} µs/unit`;
    console.log(
      `${s.padEnd(8)} ${(100 * us / busy).toFixed(1).padStart(5)}%${per}`,
    );
  }
  console.log(
    "whose code (each sample's leaf; builtins count as their caller's):",
  );
  const owners = splitByOwner(p);
  for (const o of OWNERS) {
    const us = owners.get(o)!;
    const per = units === null ? "" : `  ${(us / units).toFixed(2)} µs/unit`;
    console.log(
      `${o.padEnd(12)} ${(100 * us / busy).toFixed(1).padStart(5)}%${per}`,
    );
  }
}
