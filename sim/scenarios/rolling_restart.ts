// Issue 24, item 4: a rolling restart. The only worker of m1 leaves (a cut, then
// a crash) and comes back within MODEL_GRACE_SECS while the worker of m2 stays
// connected: requests for m1 arriving in the gap wait in the queue for its
// return, never 404 (`sim/scenarios_test.ts` checks the trace for 404s).
import { load, type Scenario, worker } from "../scenario.ts";

export const rollingRestart: Scenario = {
  name: "rolling_restart",
  tickMs: 250,
  faultsEndMs: 7_000,
  config: {},
  workers: [
    worker("only-m1", ["m1"], {
      reconnectAfterMs: 1_200,
      faults: [
        { kind: "disconnectAt", atMs: 1_500 },
        { kind: "disconnectAt", atMs: 4_500 },
      ],
    }),
    worker("stays-m2", ["m2"], { connectAtMs: 300 }),
  ],
  clients: [],
  load: [load({ count: 80, fromMs: 600, toMs: 7_000, models: ["m1", "m2"] })],
  shutdownAtMs: null,
};
