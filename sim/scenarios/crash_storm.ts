// Workers die mid-stream again and again (crash at chunk k) and some answer with
// errors: requests are requeued at most 3 times, streams that started fail
// instead of being spliced (C22-C24).
import { load, type Scenario, worker } from "../scenario.ts";

export const crashStorm: Scenario = {
  name: "crash_storm",
  tickMs: 250,
  faultsEndMs: 10_000,
  config: {},
  workers: [
    worker("s1", ["m1"], {
      reconnectAfterMs: 200,
      faults: [{ kind: "crashAtChunk", chunk: 3 }],
    }),
    worker("s2", ["m1"], {
      reconnectAfterMs: 300,
      faults: [{ kind: "crashAtChunk", chunk: 5 }, {
        kind: "errorReplies",
        num: 1,
        den: 3,
      }],
    }),
    worker("s3", ["m1"], {
      reconnectAfterMs: 250,
      faults: [{ kind: "errorReplies", num: 2, den: 3 }],
    }),
    worker("s4", ["m1"], {
      connectAtMs: 3_000,
      reconnectAfterMs: 500,
      faults: [{ kind: "crashAtChunk", chunk: 1 }],
    }),
  ],
  clients: [],
  load: [load({ count: 70, fromMs: 0, toMs: 9_000, streamingPct: 40 })],
  shutdownAtMs: null,
};
