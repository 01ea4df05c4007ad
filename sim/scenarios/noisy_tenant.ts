// Spec 004 fairness: tenant "noisy" bursts a thousand requests in half a second,
// tenant "steady" sends a trickle, tenant "quiet" sends a single request now and
// then into the backlog. Round-robin over tenants serves each quiet request within
// one dispatch per other waiting tenant (fairnessBound; the test asserts the
// wait of the quiet ones), while the burst still drains.
import { type ClientSpec, load, type Scenario, worker } from "../scenario.ts";

function quiet(atMs: number): ClientSpec {
  return {
    atMs,
    model: "m1",
    streaming: atMs % 2 === 0,
    abortAfterChunks: null,
    abortAfterMs: null,
    stall: false,
    tenant: "quiet",
  };
}

const fast = {
  maxConcurrent: 2,
  firstChunkMs: [10, 40] as const,
  chunkGapMs: [5, 15] as const,
  chunks: [1, 3] as const,
  netDelayMs: [1, 5] as const,
};

export const noisyTenant: Scenario = {
  name: "noisy_tenant",
  tickMs: 250,
  faultsEndMs: 8_000,
  config: {
    queueLenMax: 1_200,
    tenantQueueLenMax: 1_100,
    queueTimeoutMs: 60_000,
    requestTimeoutMs: 90_000,
  },
  workers: [
    worker("a", ["m1"], fast),
    worker("b", ["m1"], fast),
    worker("c", ["m1"], fast),
  ],
  clients: [quiet(1_500), quiet(3_001), quiet(4_500), quiet(6_003)],
  load: [
    load({ count: 1_000, fromMs: 100, toMs: 600, tenants: ["noisy"] }),
    load({ count: 40, fromMs: 100, toMs: 8_000, tenants: ["steady"] }),
  ],
  shutdownAtMs: null,
};
