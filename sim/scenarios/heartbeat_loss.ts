// Workers stop answering pings for longer than the heartbeat timeout: the server
// closes them ("worker heartbeat timed out") and requeues their requests (C25, C22).
import { load, type Scenario, worker } from "../scenario.ts";

export const heartbeatLoss: Scenario = {
  name: "heartbeat_loss",
  tickMs: 250,
  faultsEndMs: 12_000,
  config: {},
  workers: [
    worker("h1", ["m1"], {
      reconnectAfterMs: 1_000,
      chunkGapMs: [100, 400],
      faults: [{ kind: "stopPongs", fromMs: 1_000, untilMs: 6_000 }],
    }),
    worker("h2", ["m1"], {
      faults: [{ kind: "stopPongs", fromMs: 4_000, untilMs: 20_000 }],
    }),
    worker("h3", ["m1"], { connectAtMs: 5_000 }),
  ],
  clients: [],
  load: [load({ count: 50, fromMs: 0, toMs: 11_000 })],
  shutdownAtMs: null,
};
