// Operators drain workers while they are busy: no new requests reach a draining
// worker, in-flight ones finish, the worker is closed when idle or at the drain
// timeout (C28); replacements join later.
import { load, type Scenario, worker } from "../scenario.ts";

export const drainDuringLoad: Scenario = {
  name: "drain_during_load",
  tickMs: 250,
  faultsEndMs: 9_000,
  config: {},
  workers: [
    worker("d1", ["m1", "m2"], {
      maxConcurrent: 3,
      faults: [{ kind: "drainAt", atMs: 2_000 }],
    }),
    worker("d2", ["m1"], {
      chunkGapMs: [200, 900],
      reconnectAfterMs: 1_500,
      faults: [{ kind: "drainAt", atMs: 3_000 }],
    }),
    worker("d3", ["m2", "*"], {
      connectAtMs: 4_000,
      faults: [{ kind: "drainAt", atMs: 7_000 }],
    }),
  ],
  clients: [],
  load: [load({ count: 60, fromMs: 0, toMs: 8_500, models: ["m1", "m2"] })],
  shutdownAtMs: null,
};
