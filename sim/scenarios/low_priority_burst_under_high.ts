// Spec 004 priorities: two tenants keep the fleet saturated with high-priority
// requests (more arrive than the workers can serve), some normal ones mix in,
// and a burst of a hundred low-priority requests lands in the middle. Stride
// weights 8:4:1 still serve low (noStarvation) while high keeps precedence
// (priorityOrder); the test asserts low got through during the high load.
import { load, type Scenario, worker } from "../scenario.ts";

const slots = {
  maxConcurrent: 2,
  firstChunkMs: [40, 120] as const,
  chunkGapMs: [10, 40] as const,
  chunks: [1, 4] as const,
};

export const lowPriorityBurstUnderHigh: Scenario = {
  name: "low_priority_burst_under_high",
  tickMs: 250,
  faultsEndMs: 10_000,
  config: {
    queueLenMax: 500,
    tenantQueueLenMax: 400,
    queueTimeoutMs: 20_000,
    requestTimeoutMs: 30_000,
  },
  workers: [worker("x", ["m1"], slots), worker("y", ["m1"], slots)],
  clients: [],
  load: [
    load({
      count: 300,
      fromMs: 0,
      toMs: 10_000,
      tenants: ["acme", "globex"],
      priorities: ["high"],
    }),
    load({
      count: 40,
      fromMs: 0,
      toMs: 10_000,
      tenants: ["acme"],
      priorities: ["normal"],
    }),
    load({
      count: 100,
      fromMs: 3_000,
      toMs: 3_200,
      tenants: ["batch"],
      priorities: ["low"],
      streamingPct: 0,
    }),
  ],
  shutdownAtMs: null,
};
