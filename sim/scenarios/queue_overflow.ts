// A burst far above capacity: the queue fills to MAX_QUEUE_LEN, new requests get
// 503 queue_full, queued ones time out with 504 and no cancel (C9, C12), and
// requeued ones are re-admitted even past the bound.
import { load, type Scenario, worker } from "../scenario.ts";

export const queueOverflow: Scenario = {
  name: "queue_overflow",
  tickMs: 250,
  faultsEndMs: 6_000,
  config: { queueLenMax: 8, queueTimeoutMs: 1_500 },
  workers: [
    worker("slow", ["m1"], {
      maxConcurrent: 2,
      chunks: [5, 10],
      chunkGapMs: [100, 300],
      reconnectAfterMs: 200,
      faults: [{ kind: "disconnectAt", atMs: 2_000 }],
    }),
    worker("slower", ["m1"], {
      maxConcurrent: 1,
      chunks: [8, 12],
      chunkGapMs: [200, 400],
    }),
  ],
  clients: [],
  load: [
    load({ count: 80, fromMs: 0, toMs: 3_000 }),
    load({ count: 20, fromMs: 4_000, toMs: 6_000 }),
  ],
  shutdownAtMs: null,
};
