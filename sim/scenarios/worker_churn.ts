// Workers come and go under load: network cuts with reconnects, late joiners,
// a drain; requests move between workers (requeue keeps place and deadline).
import { load, type Scenario, worker } from "../scenario.ts";

export const workerChurn: Scenario = {
  name: "worker_churn",
  tickMs: 250,
  faultsEndMs: 9_000,
  config: {},
  workers: [
    worker("a", ["m1"], {
      reconnectAfterMs: 400,
      faults: [{ kind: "disconnectAt", atMs: 1_500 }, {
        kind: "disconnectAt",
        atMs: 4_000,
      }],
    }),
    worker("b", ["m1", "m2"], {
      connectAtMs: 1_000,
      reconnectAfterMs: 700,
      faults: [{ kind: "disconnectAt", atMs: 3_000 }, {
        kind: "drainAt",
        atMs: 6_000,
      }],
    }),
    worker("c", ["m2"], {
      connectAtMs: 2_500,
      reconnectAfterMs: 300,
      faults: [{ kind: "disconnectAt", atMs: 5_000 }],
    }),
  ],
  clients: [],
  load: [
    load({
      count: 60,
      fromMs: 0,
      toMs: 8_000,
      models: ["m1", "m2"],
      abortPct: 10,
    }),
  ],
  shutdownAtMs: null,
};
