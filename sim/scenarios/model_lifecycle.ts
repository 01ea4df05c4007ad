// Model lifecycle under load (issue 9, spec 004 governed operations): operators
// load, unload and flush models at random times, with and without a target
// worker, while clients keep streaming. Three workers negotiate lifecycle-v1
// (one fails a share of its tasks, one sometimes never answers, one crashes
// mid-task), one lists only capabilities-v1 and one lists an empty set, two are
// original-style (no `extensions` field; one of them sends capabilities frames
// anyway, which the core must ignore). Workers are cut, reconnect and drain.
import {
  lifecycle,
  load,
  operators,
  type Scenario,
  worker,
} from "../scenario.ts";

export const modelLifecycle: Scenario = {
  name: "model_lifecycle",
  tickMs: 250,
  faultsEndMs: 10_000,
  config: { lifecycleTaskTimeoutMs: 2_000 },
  workers: [
    worker("steady", ["m1"], {
      maxConcurrent: 3,
      lifecycle: lifecycle({ failNum: 1 }),
    }),
    worker("flaky", ["m1", "m2"], {
      reconnectAfterMs: 400,
      lifecycle: lifecycle({ hangNum: 3, failNum: 2, stepMs: [100, 900] }),
      faults: [{ kind: "disconnectAt", atMs: 4_500 }],
    }),
    worker("crashy", ["m2"], {
      connectAtMs: 800,
      reconnectAfterMs: 300,
      lifecycle: lifecycle({ crashNum: 3, hangNum: 1, steps: [1, 4] }),
      faults: [{ kind: "drainAt", atMs: 8_000 }],
    }),
    worker("caps_only", ["m1", "m3"], {
      reconnectAfterMs: 600,
      lifecycle: lifecycle({ extensions: ["capabilities-v1"] }),
      faults: [{ kind: "disconnectAt", atMs: 6_000 }],
    }),
    worker("empty_list", ["m3"], {
      lifecycle: lifecycle({ extensions: [], sendsCapabilities: false }),
    }),
    worker("original", ["m1", "m2"], { reconnectAfterMs: 500, faults: [] }),
    worker("original_chatty", ["m2", "m3"], {
      connectAtMs: 1_500,
      reconnectAfterMs: 500,
      // Original-style register, yet capabilities frames: ignored by the core.
      lifecycle: lifecycle({ extensions: null }),
      faults: [{ kind: "disconnectAt", atMs: 3_000 }],
    }),
  ],
  clients: [],
  load: [
    load({
      count: 120,
      fromMs: 0,
      toMs: 9_500,
      models: ["m1", "m2", "m3"],
      abortPct: 10,
    }),
  ],
  shutdownAtMs: null,
  operators: [
    operators({ count: 60, fromMs: 100, toMs: 9_500, targetPct: 45 }),
  ],
};
