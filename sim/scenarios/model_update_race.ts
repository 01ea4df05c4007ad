// Workers change their model lists while requests for those models are queued,
// dispatched and streaming (C26): routing follows the new acked set at once, in
// flight ones finish, newly served models drain the queue.
import { load, type Scenario, worker } from "../scenario.ts";

export const modelUpdateRace: Scenario = {
  name: "model_update_race",
  tickMs: 250,
  faultsEndMs: 8_000,
  config: {},
  workers: [
    worker("u1", ["m1"], {
      faults: [
        { kind: "modelsUpdate", atMs: 1_000, models: ["m2"] },
        {
          kind: "modelsUpdate",
          atMs: 2_500,
          models: ["m1", "m2", " m3 ", "m3", ""],
        },
        { kind: "modelsUpdate", atMs: 5_000, models: ["*"] },
      ],
    }),
    worker("u2", ["m2", "m3"], {
      faults: [
        { kind: "modelsUpdate", atMs: 1_000, models: [] },
        { kind: "modelsUpdate", atMs: 3_000, models: ["m1"] },
      ],
    }),
    worker("u3", ["m3"], {
      connectAtMs: 2_000,
      faults: [{ kind: "modelsUpdate", atMs: 4_000, models: ["m1", "m3"] }],
    }),
  ],
  clients: [],
  load: [
    load({ count: 60, fromMs: 0, toMs: 7_500, models: ["m1", "m2", "m3"] }),
  ],
  shutdownAtMs: null,
};
