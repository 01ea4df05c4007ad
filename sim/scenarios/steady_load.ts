// Baseline: three healthy workers, mixed streaming and non-streaming load on
// two models plus a wildcard worker; no faults. Everything must complete.
import { load, type Scenario, worker } from "../scenario.ts";

export const steadyLoad: Scenario = {
  name: "steady_load",
  tickMs: 250,
  faultsEndMs: 8_000,
  config: {},
  workers: [
    worker("alpha", ["m1", "m2"], { maxConcurrent: 3 }),
    worker("beta", ["m1"], { maxConcurrent: 2 }),
    worker("gamma", ["*"], { maxConcurrent: 2, connectAtMs: 500 }),
  ],
  clients: [],
  load: [
    load({ count: 80, fromMs: 100, toMs: 8_000, models: ["m1", "m2", "m3"] }),
  ],
  shutdownAtMs: null,
};
