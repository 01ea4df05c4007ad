// Issue 14, real backends and real faults: backends that refuse connections,
// die before the first byte or mid-stream, answer 4xx/5xx, answer slowly or with
// a body larger than a frame (our workers split it, body-chunks-v1; original
// ones send the oversized frame), and a worker draining itself on SIGTERM
// (drain-v1) while requests for its only model keep arriving.
import {
  backendPlan,
  load,
  OUR_EXTENSIONS,
  type Scenario,
  worker,
} from "../scenario.ts";

export const realFaults: Scenario = {
  name: "real_faults",
  tickMs: 100,
  faultsEndMs: 8_000,
  config: {},
  workers: [
    // Two of ours on m1: a refused request must go to the other one.
    worker("flaky", ["m1"], {
      maxConcurrent: 3,
      extensions: OUR_EXTENSIONS,
      backend: backendPlan({
        refuseNum: 3,
        resetNum: 1,
        dieMidStreamNum: 2,
        errorStatusNum: 1,
        slowNum: 1,
        slowMs: [1_000, 4_000],
      }),
    }),
    worker("steady", ["m1"], {
      maxConcurrent: 3,
      extensions: OUR_EXTENSIONS,
      backend: backendPlan({ refuseNum: 1 }),
    }),
    // Original-style workers on m2 whose backend answers beyond a frame.
    worker("big-original", ["m2"], {
      reconnectAfterMs: 200,
      backend: backendPlan({ oversizedNum: 5 }),
    }),
    worker("big-ours", ["m2"], {
      extensions: OUR_EXTENSIONS,
      backend: backendPlan({ oversizedNum: 5 }),
    }),
    // The only m3 worker drains itself while busy with long streams.
    worker("leaving", ["m3"], {
      maxConcurrent: 3,
      extensions: OUR_EXTENSIONS,
      firstChunkMs: [200, 600],
      chunkGapMs: [100, 300],
      chunks: [4, 8],
      reconnectAfterMs: 2_500,
      faults: [{ kind: "signalAt", atMs: 1_500 }],
    }),
  ],
  clients: [],
  load: [
    load({ count: 60, fromMs: 100, toMs: 6_000, models: ["m1"] }),
    load({
      count: 30,
      fromMs: 100,
      toMs: 6_000,
      models: ["m2"],
      streamingPct: 0,
    }),
    load({ count: 40, fromMs: 1_000, toMs: 4_000, models: ["m3"] }),
  ],
  shutdownAtMs: null,
};
