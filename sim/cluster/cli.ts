// `deno task sim:cluster`: the cluster simulator (issues 16, 34) from the command line.
//   deno task sim:cluster --runs N [--seed S] [--mutant NAME]
//   deno task sim:cluster --seed S --one [--trace]  (one scenario, in full)
// Run k of a sweep uses seed S + k, so a failure names the seed to replay.
// Like sim/cli.ts, the only wall-clock read is here, for runs/s. The sweep
// hash folds every run's log (ids and data): the same seeds, the same hash.
import { parseArgs } from "node:util";
import {
  CLUSTER_MUTANTS,
  type ClusterMutant,
  clusterScenario,
  runCluster,
} from "./world.ts";
import { parseSeed } from "../prng.ts";
import { TraceHash } from "../trace.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    runs: { type: "string", default: "1000" },
    seed: { type: "string", default: "20261123" },
    mutant: { type: "string" },
    one: { type: "boolean", default: false },
    trace: { type: "boolean", default: false },
  },
  strict: true,
});
const seed = parseSeed(values.seed);
const mutant = (values.mutant ?? null) as ClusterMutant | null;
if (seed === null || (mutant !== null && !CLUSTER_MUTANTS.includes(mutant))) {
  console.error(
    `usage: deno task sim:cluster [--runs N] [--seed S] [--one] [--mutant ${
      CLUSTER_MUTANTS.join("|")
    }]`,
  );
  Deno.exit(2);
}
const runs = values.one ? 1 : Number(values.runs);
const started = performance.now();
let entries = 0;
const sweepHash = new TraceHash();
for (let k = 0n; k < BigInt(runs); k++) {
  const s = clusterScenario(seed + k);
  const r = runCluster(
    s,
    mutant,
    values.one && values.trace ? (line) => console.log(line) : null,
  );
  entries += r.stats.entries;
  sweepHash.line(r.hash);
  if (values.one || r.violations.length > 0) {
    console.log(JSON.stringify(
      { ...s, seed: String(s.seed), stats: r.stats },
      null,
      1,
    ));
  }
  if (r.violations.length > 0) {
    for (const v of r.violations) console.log(`${v.invariant}: ${v.detail}`);
    console.log(
      `replay: deno task sim:cluster --seed ${seed + k} --one${
        mutant === null ? "" : ` --mutant ${mutant}`
      }`,
    );
    Deno.exit(1);
  }
}
const secs = (performance.now() - started) / 1000;
console.log(
  `${runs} cluster runs from seed ${seed}: every invariant held (${entries} log entries, ${
    Math.round(runs / secs)
  } runs/s)`,
);
console.log(`sweep hash ${sweepHash.hex()}`);
