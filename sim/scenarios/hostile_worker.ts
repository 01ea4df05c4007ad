// A hostile worker sends garbage of every decode error kind (C33), chunks and
// completions for requests that are not its own (C32), duplicate completions
// (C20), and lies about its load; honest workers must be unaffected.
import { load, type Scenario, worker } from "../scenario.ts";

export const hostileWorker: Scenario = {
  name: "hostile_worker",
  tickMs: 250,
  faultsEndMs: 8_000,
  config: {},
  workers: [
    worker("evil", ["m1"], {
      reconnectAfterMs: 300,
      faults: [
        { kind: "foreignFramesAt", atMs: 800, count: 10 },
        { kind: "foreignFramesAt", atMs: 2_200, count: 10 },
        { kind: "garbageAt", atMs: 3_000, variant: 0 },
        { kind: "garbageAt", atMs: 3_600, variant: 3 },
        { kind: "garbageAt", atMs: 4_200, variant: 6 },
        { kind: "garbageAt", atMs: 4_800, variant: 7 },
        { kind: "foreignFramesAt", atMs: 5_500, count: 20 },
        { kind: "duplicateComplete", num: 1, den: 2 },
        { kind: "lieLoad", extra: 1 },
      ],
    }),
    worker("honest1", ["m1"], { maxConcurrent: 3 }),
    worker("honest2", ["m1"], { onCancel: "ignore" }),
  ],
  clients: [],
  load: [load({ count: 60, fromMs: 0, toMs: 7_500, abortPct: 15 })],
  shutdownAtMs: null,
};
