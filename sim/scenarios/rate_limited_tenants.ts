// Spec 004 rate limits: "gold" may send 20 per second and mostly stays under,
// "free" 3 per second and sends far more, other tenants fall under the default
// 5 per 2 s. Over the limit -> 429 rate_limit_exceeded before queueing, not
// counted; the rateLimit invariant recounts every sliding window (never more
// admissions than the limit, never a 429 with room left), with ties at the
// window edge (several requests in the same millisecond) included.
import { type ClientSpec, load, type Scenario, worker } from "../scenario.ts";

/** Five "free" requests in the same millisecond: two must be refused. */
const volley: ClientSpec[] = Array.from({ length: 5 }, () => ({
  atMs: 7_000,
  model: "m1",
  streaming: false,
  abortAfterChunks: null,
  abortAfterMs: null,
  stall: false,
  tenant: "free",
}));

export const rateLimitedTenants: Scenario = {
  name: "rate_limited_tenants",
  tickMs: 250,
  faultsEndMs: 8_000,
  config: {
    queueLenMax: 60,
    rateLimits: {
      gold: { limit: 20, windowMs: 1_000 },
      free: { limit: 3, windowMs: 1_000 },
    },
    defaultRateLimit: { limit: 5, windowMs: 2_000 },
  },
  workers: [
    worker("p", ["m1", "m2"], { maxConcurrent: 3 }),
    worker("q", ["m1"], { maxConcurrent: 3 }),
    worker("r", ["m2"], {
      maxConcurrent: 2,
      faults: [{ kind: "disconnectAt", atMs: 3_000 }],
      reconnectAfterMs: 300,
    }),
  ],
  clients: volley,
  load: [
    load({ count: 110, fromMs: 0, toMs: 6_000, tenants: ["gold"] }),
    load({
      count: 80,
      fromMs: 0,
      toMs: 6_000,
      tenants: ["free"],
      models: ["m1", "m2"],
    }),
    load({
      count: 40,
      fromMs: 0,
      toMs: 6_000,
      tenants: ["t1", "t2"],
      cacheKeys: ["s1", "s2"],
    }),
    load({ count: 15, fromMs: 0, toMs: 6_000 }),
  ],
  shutdownAtMs: null,
};
