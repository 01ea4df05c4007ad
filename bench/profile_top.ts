// Summarises a V8 .cpuprofile (from `deno run --cpu-prof`): the functions with
// the most self time, and self time by source file.
//   deno run --allow-read bench/profile_top.ts <file.cpuprofile> [top=25]
type Node = {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
};
type Profile = {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
};

const [file, topArg] = Deno.args;
if (file === undefined) {
  console.error("usage: profile_top.ts <file.cpuprofile> [top]");
  Deno.exit(2);
}
const top = Number(topArg ?? "25");
const p = JSON.parse(Deno.readTextFileSync(file)) as Profile;
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const self = new Map<number, number>();
for (let i = 0; i < p.samples.length; i++) {
  const id = p.samples[i]!;
  self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0));
}
const total = [...self.values()].reduce((a, b) => a + b, 0);
const byFn = new Map<string, number>();
const byFile = new Map<string, number>();
for (const [id, us] of self) {
  const f = byId.get(id)!.callFrame;
  const short = f.url.replace(
    /^.*\/(node_modules|\.deno|npm|ext|node)\//,
    "$1/",
  )
    .replace(`file://${Deno.cwd()}/`, "");
  const key = `${f.functionName || "(anonymous)"} ${short}:${f.lineNumber + 1}`;
  byFn.set(key, (byFn.get(key) ?? 0) + us);
  const fileKey = short === "" ? f.functionName : short;
  byFile.set(fileKey, (byFile.get(fileKey) ?? 0) + us);
}
const pct = (us: number) => (100 * us / total).toFixed(1).padStart(5) + "%";
console.log(`total sampled ${(total / 1000).toFixed(0)} ms`);
console.log("\nself time by function:");
for (const [k, us] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, top)) {
  console.log(`${pct(us)}  ${k}`);
}
console.log("\nself time by file:");
for (const [k, us] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, top)) {
  console.log(`${pct(us)}  ${k}`);
}
