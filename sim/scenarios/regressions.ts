// Every bug the simulator found, as a scenario with a pinned seed (sled's
// tests/00_regression.rs); tests replay each one. Paste what a failing sweep
// prints (sim/scenario_source.ts: only what differs from the sweep's floor) into
// `pinned(seed, { name, postmortem, ... })`: the postmortem names the invariant
// and the bug in a line; the run must fail with the bug put back. The whole
// story is in docs/decisions.md ("Pinned regressions, one by one").
import {
  client,
  type Scenario,
  swept,
  sweptBackend,
  sweptLifecycle,
  sweptOperators,
  sweptWorker,
} from "../scenario.ts";

export type Regression = {
  scenario: Scenario;
  seed: bigint;
  postmortem: string;
};

type Pinned = Parameters<typeof swept>[0] & { postmortem: string };

/** A regression: the run's seed, and the scenario with its postmortem. */
function pinned(seed: bigint, { postmortem, ...fields }: Pinned): Regression {
  return { seed, postmortem, scenario: swept(fields) };
}

const lowBankedCredit = pinned(0n, {
  name: "regression_low_banked_credit",
  postmortem: "priorityOrder: a blocked class banked stride credit",
  faultsEndMs: 1000,
  config: { queueLenMax: 3, tenantQueueLenMax: 2 },
  workers: [
    sweptWorker("w0", ["*"], {
      reconnectAfterMs: 50,
      faults: [{ kind: "disconnectAt", atMs: 11 }],
    }),
    sweptWorker("w1", ["*"], { endpointPrefixes: ["/v1/embeddings"] }),
  ],
  clients: [
    client(0, "m1", { tenant: "t0", priority: "high" }),
    client(0, "m1", { tenant: "t1", priority: "high", path: "/v1/embeddings" }),
    client(1, "m1", { tenant: "t0", priority: "high", path: "/v1/embeddings" }),
    client(0, "m1", { tenant: "t1", binary: true }),
    client(1, "m1", { tenant: "t0", priority: "high" }),
    client(6, "m1", { tenant: "t0" }),
  ],
});

const affinityToWildcard = pinned(100863868n, {
  name: "regression_affinity_to_wildcard",
  postmortem: "eligibleWorker (C42): affinity chose `*` over a free exact",
  faultsEndMs: 4865,
  config: { tenantQueueLenMax: 1, affinityLoadMargin: 0 },
  workers: [
    sweptWorker("w0", ["*"], { reconnectAfterMs: 50 }),
    sweptWorker("w1", ["m3"]),
    sweptWorker("w2", ["m2", "*"], { reconnectAfterMs: 50 }),
  ],
  clients: [
    client(0, "m2", { tenant: "t1", cacheKey: "k1" }),
    client(6, "m2", { tenant: "t1", cacheKey: "k1" }),
  ],
});

const floatStride = pinned(1n, {
  name: "regression_float_stride",
  postmortem: "priorityOrder: float strides gave normal 7 turns to high's 1",
  config: { queueLenMax: 20, priorityWeights: { high: 1, normal: 6, low: 1 } },
  workers: [sweptWorker("w0", ["m1"], { connectAtMs: 50 })],
  clients: [
    client(0, "m1", { priority: "high" }),
    client(0, "m1", { priority: "high" }),
    ...Array(8).fill(client(0, "m1")),
  ],
});

const trialChunkMovesQueue = pinned(2147483634n, {
  name: "regression_trial_chunk_moves_queue",
  postmortem: "fifo: a circuit closing on a trial chunk left the queue",
  faultsEndMs: 4442,
  config: {
    tenantQueueLenMax: 1,
    priorityWeights: { high: 1, normal: 1, low: 1 },
    lifecycleTaskTimeoutMs: 300,
  },
  workers: [
    sweptWorker("w0", ["*"], {
      connectAtMs: 265,
      firstChunkMs: [63, 63],
      netDelayMs: [5, 12],
    }),
    sweptWorker("w1", ["*"], {
      maxConcurrent: 2,
      firstChunkMs: [5, 65],
      chunkGapMs: [5, 263],
      chunks: [1, 5],
      netDelayMs: [0, 25],
      faults: [{ kind: "errorReplies", num: 4, den: 4 }],
      lifecycle: sweptLifecycle({
        extensions: ["lifecycle-v1"],
        stepMs: [16, 16],
        steps: [0, 1],
        sendsCapabilities: true,
      }),
    }),
  ],
  clients: [
    client(274, "nope", { tenant: "t1", priority: "high" }),
    client(679, "m1", { streaming: true, tenant: "t0", priority: "high" }),
    client(1200, "m1", { tenant: "t0", priority: "high" }),
    client(1200, "m1", { tenant: "t0", priority: "high" }),
    client(0, "m1", { streaming: true, tenant: "t0", priority: "high" }),
    client(601, "m1", { streaming: true, tenant: "t0", priority: "high" }),
    client(161, "m1", { tenant: "t0", priority: "high" }),
    client(1125, "nope", { streaming: true, tenant: "t0", priority: "high" }),
    client(607, "m1", { streaming: true, tenant: "t1", priority: "high" }),
    client(979, "m1", { tenant: "t0", priority: "high" }),
    client(978, "m1", { streaming: true, tenant: "t0", priority: "high" }),
    client(521, "m1", { abortAfterMs: 81, tenant: "t0", priority: "high" }),
    client(161, "nope", { tenant: "t1", priority: "high" }),
    client(1052, "m1", { streaming: true, tenant: "t1", priority: "high" }),
    client(1224, "m3", { tenant: "t0", priority: "high" }),
  ],
  operators: [
    sweptOperators({ count: 2, toMs: 4442, targetPct: 18 }),
    sweptOperators({
      count: 6,
      toMs: 4442,
      loadPct: 29,
      unloadPct: 27,
      targetPct: 34,
    }),
  ],
});

const coolDownBeforeDrop = pinned(1n, {
  name: "regression_cool_down_before_drop",
  postmortem: "eligibleWorker (C42): a requeue ran before a cool-down ended",
  config: { queueLenMax: 3 },
  workers: [
    sweptWorker("wH", ["m1"], {
      firstChunkMs: [5000, 5000],
      faults: [{ kind: "stopPongs", fromMs: 0, untilMs: 5000 }],
    }),
    sweptWorker("wW", ["*"]),
    sweptWorker("wE", ["m1"], {
      connectAtMs: 250,
      extensions: ["capabilities-v1"],
      backend: sweptBackend({ refuseNum: 16 }),
    }),
  ],
  clients: [
    client(200, "m1"),
    client(310, "m1"),
    client(320, "m1"),
    client(330, "m1"),
  ],
});

const newcomerThroughQueue = pinned(1n, {
  name: "regression_newcomer_through_queue",
  postmortem: "fairnessBound (observer): a newcomer's turn went uncounted",
  config: { queueLenMax: 5, backendFailuresMax: 5 },
  workers: [
    sweptWorker("w0", ["m1"], { firstChunkMs: [100, 100] }),
    sweptWorker("w1", ["m1"], {
      connectAtMs: 20,
      extensions: ["capabilities-v1"],
      backend: sweptBackend({ refuseNum: 16 }),
    }),
  ],
  clients: [
    client(5, "m1", { tenant: "t2" }),
    client(30, "m1", { tenant: "t0" }),
    client(40, "m1", { tenant: "t1" }),
    client(120, "m1", { tenant: "t0" }),
    client(150, "m1", { tenant: "t1" }),
  ],
});

const drainMovesAvoidingQueue = pinned(1n, {
  name: "regression_drain_moves_avoiding_queue",
  postmortem: "fifo: draining the only other worker did not move the queue",
  config: { queueLenMax: 3 },
  workers: [
    sweptWorker("w0", ["m1", "m2"], {
      connectAtMs: 8,
      extensions: ["capabilities-v1"],
      backend: sweptBackend({ refuseNum: 16 }),
    }),
    sweptWorker("w1", ["m1"], {
      firstChunkMs: [1000, 1000],
      faults: [{ kind: "drainAt", atMs: 200 }],
    }),
  ],
  clients: [client(5, "m1"), client(10, "m1"), client(250, "m2")],
});

const cancelRefilesTrial = pinned(1992847323n, {
  name: "regression_cancel_refiles_trial",
  postmortem: "cacheAffinity: a cancel did not re-file a half-open worker",
  tickMs: 250,
  faultsEndMs: 4742,
  config: {
    tenantQueueLenMax: 1,
    priorityWeights: { high: 1, normal: 1, low: 1 },
    affinityLoadMargin: 0,
    lifecycleTaskTimeoutMs: 300,
  },
  workers: [
    sweptWorker("w0", ["*"], {
      maxConcurrent: 2,
      faults: [{ kind: "errorReplies", num: 3, den: 4 }],
      lifecycle: sweptLifecycle({
        extensions: ["lifecycle-v1"],
        stepMs: [10, 11],
        steps: [0, 2],
      }),
      backend: sweptBackend({ slowNum: 1, slowMs: [500, 1059] }),
    }),
    sweptWorker("w1", ["m1", "m3"], {
      maxConcurrent: 2,
      firstChunkMs: [5, 6],
      netDelayMs: [0, 8],
      reconnectAfterMs: 493,
      faults: [{ kind: "stopPongs", fromMs: 0, untilMs: 501 }],
      lifecycle: sweptLifecycle({ extensions: null }),
      backend: sweptBackend(),
    }),
    sweptWorker("w2", ["m3"], {
      lifecycle: sweptLifecycle({ extensions: null }),
    }),
    sweptWorker("w3", ["m2"]),
  ],
  clients: [
    client(0, "m1", { tenant: "t0" }),
    client(7, "m1", { tenant: "t0" }),
    client(7, "m1", { tenant: "t1" }),
    client(1750, "m1", { tenant: "t1", cacheKey: "k3" }),
    client(312, "nope", { tenant: "t1" }),
    client(1742, "m1", { tenant: "t1" }),
    client(1000, "m1", { tenant: "t1", cacheKey: "k3" }),
    client(702, "m1", { tenant: "t1" }),
    client(328, "m1", { tenant: "t0" }),
    client(316, "m1", { streaming: true, tenant: "t0" }),
  ],
  operators: [
    sweptOperators({ count: 3, toMs: 4742, loadPct: 18, targetPct: 1 }),
  ],
});

const cancelMovesQueueToTrial = pinned(544219811n, {
  name: "regression_cancel_moves_queue_to_trial",
  postmortem: "fifo: a cancel that freed a trial did not move the queue",
  faultsEndMs: 2614,
  config: {
    requestTimeoutMs: 1701,
    priorityWeights: { high: 1, normal: 1, low: 1 },
    defaultRateLimit: { limit: 1, windowMs: 100 },
    affinityLoadMargin: 0,
    lifecycleTaskTimeoutMs: 300,
  },
  workers: [
    sweptWorker("w0", ["m1", "m3"], {
      maxConcurrent: 2,
      chunks: [0, 1],
      netDelayMs: [0, 1],
      faults: [{ kind: "errorReplies", num: 3, den: 4 }],
      lifecycle: sweptLifecycle({ extensions: ["capabilities-v1"] }),
      backend: sweptBackend({ slowNum: 1, slowMs: [500, 1937] }),
    }),
    sweptWorker("w1", ["m2"], { backend: sweptBackend() }),
  ],
  clients: [
    client(1721, "m1", { priority: "high" }),
    client(0, "m1", { streaming: true, abortAfterMs: 1721, priority: "high" }),
    client(1401, "m3", { priority: "high" }),
    client(100, "m1", { priority: "high" }),
  ],
  operators: [sweptOperators({ toMs: 2614 })],
});

const oversizedAckFreesSlot = pinned(350035383n, {
  name: "regression_oversized_ack_frees_slot",
  postmortem: "maxConcurrent (observer): an oversized cancel ack kept a slot",
  faultsEndMs: 5325,
  config: {
    tenantQueueLenMax: 1,
    priorityWeights: { high: 1, normal: 1, low: 1 },
    defaultRateLimit: { limit: 1, windowMs: 100 },
    affinityLoadMargin: 0,
    lifecycleTaskTimeoutMs: 300,
  },
  workers: [
    sweptWorker("w0", ["*"]),
    sweptWorker("w1", ["m3", "*"], {
      netDelayMs: [0, 1],
      lifecycle: sweptLifecycle({ extensions: null }),
      backend: sweptBackend({ oversizedNum: 1 }),
    }),
    sweptWorker("w2", ["m3"], {
      lifecycle: sweptLifecycle({ extensions: null }),
    }),
    sweptWorker("w3", ["m3"]),
    sweptWorker("w4", ["*"]),
  ],
  clients: [
    client(1600, "m3", { abortAfterMs: 6, tenant: "t1", priority: "high" }),
    client(1, "m3", { tenant: "t1", priority: "high" }),
    client(1601, "m1", { tenant: "t0", priority: "high" }),
    client(1601, "m1", { tenant: "t2", priority: "high" }),
    client(1701, "m1", { tenant: "t0", priority: "high" }),
    client(101, "m3", { tenant: "t1", priority: "high" }),
  ],
  operators: [sweptOperators({ toMs: 5325 })],
});

const oversizedAckMovesQueue = pinned(1n, {
  name: "regression_oversized_ack_moves_queue",
  postmortem: "fifo: an oversized cancel ack did not move the queue",
  workers: [
    sweptWorker("w0", ["m1", "m2"], {
      firstChunkMs: [50, 50],
      netDelayMs: [10, 10],
      backend: sweptBackend({ oversizedNum: 16 }),
    }),
  ],
  clients: [
    client(20, "m1", { abortAfterMs: 55 }),
    client(21, "m2"),
    client(85, "m1"),
  ],
});

export const REGRESSIONS: Regression[] = [
  lowBankedCredit,
  affinityToWildcard,
  floatStride,
  trialChunkMovesQueue,
  coolDownBeforeDrop,
  newcomerThroughQueue,
  drainMovesAvoidingQueue,
  cancelRefilesTrial,
  cancelMovesQueueToTrial,
  oversizedAckFreesSlot,
  oversizedAckMovesQueue,
];
