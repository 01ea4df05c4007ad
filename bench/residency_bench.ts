// Hot-first routing (issue 30): the dispatch path once workers report which
// models they hold. Each iteration reduces 1,000 requests, each dispatched
// and completed; divide by 1,000 for one. Compare with core_bench.ts's
// "dispatch+complete" group (no residency: the path before issue 30).
import {
  EXTENSION_RESIDENCY,
  initialState,
  makeConfig,
  reduce,
  type State,
} from "../core/mod.ts";
import { addWorker, completed, request } from "./_fixtures.ts";

const BATCH = 1000;
const MODELS = ["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"];

/** `workers` workers listing 8 models with room 2; `holders(i)` says what worker i holds. */
function fleet(workers: number, holds: (i: number) => string[]): State {
  const state = initialState(
    makeConfig({ requestTimeoutMs: 1e12, queueTimeoutMs: 1e12 }),
  );
  for (let i = 0; i < workers; i++) {
    const workerId = `w${i}`;
    addWorker(state, workerId, {
      models: MODELS,
      maxConcurrent: 4,
      extensions: [EXTENSION_RESIDENCY],
    });
    reduce(state, {
      kind: "residencyReceived",
      atMs: 0,
      workerId,
      loaded: holds(i),
      loading: [],
      room: 2,
    });
  }
  return state;
}

const SHAPES: [string, (i: number) => string[]][] = [
  [
    "m0 held by a quarter of the fleet",
    (i) => [MODELS[i % 8]!, MODELS[(i + 1) % 8]!],
  ],
  ["m0 held by the last worker only", (i) => i === 0 ? ["m0"] : ["m1", "m2"]],
];

for (const [shape, holds] of SHAPES) {
  for (const workers of [10, 1000, 10_000]) {
    const state = fleet(workers, holds);
    let n = 0;
    Deno.bench({
      group: `hot-first dispatch+complete: 1,000 requests for m0, ${shape}`,
      name: `${workers} workers`,
      baseline: workers === 10,
      fn() {
        for (let i = 0; i < BATCH; i++) {
          const id = `d${n++}`;
          const effects = reduce(state, request(id, "m0", false)).effects;
          const send = effects.find((e) => e.kind === "sendToWorker");
          if (send?.kind !== "sendToWorker") throw new Error("not dispatched");
          reduce(state, completed(id, send.workerId));
        }
      },
    });
  }
}
