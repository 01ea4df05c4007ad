// `deno task sim:models`: the models simulator (issue 30). For every named
// scenario, runs seeds 1..N with workers that report residency (hot first,
// "new") and with workers that report nothing (today's routing), and prints
// loads per 1,000 requests and time to first byte (p50/p99, pooled over the
// seeds), and any invariant violation with its seed.
//   deno task sim:models [--seeds N] [--scenario NAME] [--seed N] [--mutant NAME]
//   deno task sim:models --random N     (N random fleets, seeds 1..N, both policies)
import { parseArgs } from "node:util";
import { MODELS_MUTANTS } from "./mutants.ts";
import { MODELS_SCENARIOS, randomScenario } from "./scenarios.ts";
import {
  type ModelsResult,
  percentile,
  type Policy,
  runModels,
} from "./world.ts";
import { parseSeed } from "../prng.ts";

function main(argv: string[]): number {
  const args = parseArgs({
    args: argv,
    options: {
      seeds: { type: "string", default: "10" },
      seed: { type: "string" },
      scenario: { type: "string" },
      mutant: { type: "string" },
      random: { type: "string" },
    },
    strict: true,
  }).values;
  const mutant = args.mutant === undefined
    ? undefined
    : MODELS_MUTANTS.find((m) => m.name === args.mutant);
  if (args.mutant !== undefined && mutant === undefined) {
    console.error(
      `unknown mutant "${args.mutant}"; mutants: ${
        MODELS_MUTANTS.map((m) => m.name).join(", ")
      }`,
    );
    return 2;
  }
  if (args.random !== undefined) return sweepRandom(Number(args.random));
  const random = /^random_([0-9]+)$/.exec(args.scenario ?? "");
  const scenarios = args.scenario === undefined
    ? [...MODELS_SCENARIOS.values()]
    : random !== null
    ? [randomScenario(BigInt(random[1]!))]
    : [MODELS_SCENARIOS.get(args.scenario)].filter((s) => s !== undefined);
  if (scenarios.length === 0) {
    console.error(
      `unknown scenario "${args.scenario}"; scenarios: ${
        [...MODELS_SCENARIOS.keys()].join(", ")
      }`,
    );
    return 2;
  }
  const one = args.seed === undefined ? null : parseSeed(args.seed);
  const count = Number(args.seeds);
  const seeds = one !== null
    ? [one]
    : Array.from({ length: count }, (_, i) => BigInt(i + 1));
  const policies: Policy[] = mutant === undefined ? ["new", "today"] : ["new"];
  console.log(
    `models simulator: seeds ${seeds.join(",")}${
      mutant === undefined ? "" : `, mutant ${mutant.name}`
    }`,
  );
  console.log(
    "scenario                      policy  requests  loads/1000  ttfb p50 ms  ttfb p99 ms  failed  left",
  );
  let violations = 0;
  for (const s of scenarios) {
    for (const policy of policies) {
      const runs: ModelsResult[] = seeds.map((seed) =>
        runModels(s, seed, policy, mutant?.make())
      );
      const requests = runs.reduce((a, r) => a + r.requests, 0);
      const loads = runs.reduce((a, r) => a + r.loads, 0);
      const failed = runs.reduce((a, r) => a + r.failed, 0);
      const left = runs.reduce((a, r) => a + r.aborted, 0);
      const ttfb = runs.flatMap((r) => r.ttfbMs);
      console.log(
        [
          s.name.padEnd(29),
          policy.padEnd(6),
          String(requests).padStart(9),
          (requests === 0 ? 0 : (1000 * loads) / requests).toFixed(1)
            .padStart(11),
          String(percentile(ttfb, 50)).padStart(12),
          String(percentile(ttfb, 99)).padStart(12),
          String(failed).padStart(7),
          String(left).padStart(5),
        ].join(" "),
      );
      for (const r of runs) {
        if (r.violation === null) continue;
        violations++;
        console.log(
          `  VIOLATION ${r.violation.name} (scenario ${s.name}, policy ${policy}, seed ${r.seed}): ${r.violation.message}`,
        );
      }
    }
  }
  return violations === 0 ? 0 : 1;
}

/** Random fleets (randomScenario), seeds 1..n, both policies: violations only. */
function sweepRandom(n: number): number {
  let violations = 0;
  for (let seed = 1n; seed <= BigInt(n); seed++) {
    for (const policy of ["new", "today"] as const) {
      const r = runModels(randomScenario(seed), seed, policy);
      if (r.violation === null) continue;
      violations++;
      console.log(
        `VIOLATION ${r.violation.name} (random fleet ${seed}, policy ${policy}; replay: deno task sim:models --scenario random_${seed} --seed ${seed}): ${r.violation.message}`,
      );
    }
  }
  console.log(`random fleets: ${n}, runs ${2 * n}, violations ${violations}`);
  return violations === 0 ? 0 : 1;
}

Deno.exit(main(Deno.args));
