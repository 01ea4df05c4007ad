// Most clients give up: while queued (no cancel), after some chunks or after a
// time (cancel to the worker, C18), some as slow readers; some workers never
// acknowledge a cancel (C44 grace) and one keeps streaming after it (C20).
import { load, type Scenario, worker } from "../scenario.ts";

export const massClientAbort: Scenario = {
  name: "mass_client_abort",
  tickMs: 250,
  faultsEndMs: 6_000,
  config: { queueLenMax: 30 },
  workers: [
    worker("ack", ["m1"], { maxConcurrent: 3, chunks: [3, 12] }),
    worker("silent", ["m1"], { onCancel: "silent", chunks: [3, 12] }),
    worker("stubborn", ["m1"], { onCancel: "ignore", chunks: [3, 12] }),
  ],
  clients: [],
  load: [
    load({ count: 90, fromMs: 0, toMs: 5_000, streamingPct: 70, abortPct: 80 }),
  ],
  shutdownAtMs: null,
};
