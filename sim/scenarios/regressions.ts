// Every bug the simulator found, as a named scenario with a pinned seed and a
// one-line postmortem (sled's tests/00_regression.rs). Tests replay each one.
// Each scenario is written as a failing sweep prints it (builder calls with
// only what differs from their defaults, see sim/scenario_source.ts): paste it,
// name it, and give it the run seed.
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

/**
 * Found by the fixed-seed sweep (priorityOrder), shrunk by fast-check: low m2
 * requests wait with no free worker while high m1 requests are served; the low
 * class kept its old stride pass (and `vnow` even moved back to it), so once a
 * wildcard worker freed up, low won twice in a row over a dispatchable high
 * request with equal weights (with 8:1 weights the burst grows with the backlog).
 */
const lowBankedCredit: Scenario = swept({
  name: "regression_low_banked_credit",
  faultsEndMs: 1831,
  config: { queueLenMax: 2, priorityWeights: { high: 1, normal: 1, low: 1 } },
  workers: [
    sweptWorker("w0", ["m1"], { netDelayMs: [0, 1] }),
    sweptWorker("w1", ["*"], { connectAtMs: 116, netDelayMs: [3, 12] }),
    sweptWorker("w2", ["*"], {
      chunkGapMs: [5, 87],
      chunks: [0, 3],
      reconnectAfterMs: 50,
    }),
  ],
  clients: [
    client(0, "m1", { priority: "high" }),
    client(117, "m1", { priority: "high" }),
    client(0, "m1", { priority: "high" }),
    client(1, "m1", { streaming: true, priority: "high" }),
    client(123, "nope", { priority: "high" }),
    client(126, "m1", { priority: "low" }),
    client(6, "m2", { priority: "low" }),
    client(117, "m1", { priority: "high" }),
  ],
});

/**
 * Found by the fixed-seed sweep (eligibleWorker), shrunk: r0 with cache key k1
 * was served by a wildcard worker (the only one up); r1 with the same key then
 * went to that `*` worker by affinity although w2, which acked m2 exactly, was
 * free at the same load (C42: `*` only when no exact match is free).
 */
const affinityToWildcard: Scenario = swept({
  name: "regression_affinity_to_wildcard",
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

/**
 * Found by the fixed-seed sweep (priorityOrder), shrunk: with weights high 1,
 * normal 6 the normal class's pass grew by 1/6 in floats; six steps summed to
 * 0.9999999999999999, short of high's 1, so normal won a 7th dispatch ahead of a
 * dispatchable high request where the weights allow 6 (ties go to the higher class).
 */
const floatStride: Scenario = swept({
  name: "regression_float_stride",
  faultsEndMs: 2484,
  config: {
    queueLenMax: 2,
    tenantQueueLenMax: 2,
    priorityWeights: { high: 1, normal: 6, low: 1 },
  },
  workers: [
    sweptWorker("w0", ["*"], {
      maxConcurrent: 2,
      firstChunkMs: [6, 6],
      reconnectAfterMs: 50,
      faults: [{ kind: "disconnectAt", atMs: 19 }],
    }),
  ],
  clients: [
    client(13, "m1", { tenant: "t0", priority: "normal" }),
    client(13, "nope", { tenant: "t1", priority: "high" }),
    client(76, "m1", { tenant: "t1", priority: "normal" }),
    client(87, "m1", { tenant: "t0" }),
    client(13, "m1", { tenant: "t1" }),
    client(91, "m1", { tenant: "t1", priority: "normal" }),
    client(0, "m1", { tenant: "t0", priority: "high" }),
    client(18, "m1", { tenant: "t0", priority: "normal" }),
    client(1, "m1", { tenant: "t0", priority: "high" }),
  ],
});

/**
 * Found by the fixed-seed sweep (fifo), shrunk by fast-check: a worker whose
 * backend circuit was half-open got its trial answered by a first chunk; the
 * circuit closed but the queue did not move, so a newcomer took the free slot
 * ahead of an older queued request (issue 14).
 */
const trialChunkMovesQueue: Scenario = swept({
  name: "regression_trial_chunk_moves_queue",
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

/**
 * Found by a sweep with seed 42 (eligibleWorker, C42): in one tick a worker's
 * heartbeat loss requeued its request before another worker's backend
 * cool-down was checked, so the request went to a wildcard worker while the
 * exact one was about to take trials again (issue 14).
 */
const coolDownBeforeDrop: Scenario = swept({
  name: "regression_cool_down_before_drop",
  faultsEndMs: 5029,
  config: {
    heartbeatIntervalMs: 1186,
    heartbeatTimeoutMs: 1186,
    tenantQueueLenMax: 1,
  },
  workers: [
    sweptWorker("w0", ["*"], {
      firstChunkMs: [141, 141],
      netDelayMs: [1, 18],
      faults: [{ kind: "errorReplies", num: 1, den: 4 }],
      extensions: ["body-chunks-v1"],
    }),
    sweptWorker("w1", ["*"], {
      chunkGapMs: [5, 139],
      chunks: [0, 5],
      netDelayMs: [7, 31],
    }),
    sweptWorker("w2", ["m2"], {
      maxConcurrent: 3,
      firstChunkMs: [5, 269],
      chunks: [0, 5],
      netDelayMs: [5, 18],
      faults: [{ kind: "errorReplies", num: 2, den: 4 }],
      extensions: ["body-chunks-v1"],
    }),
  ],
  clients: [
    client(162, "m2", { streaming: true, tenant: "t0" }),
    client(15, "m2", { tenant: "t0" }),
    client(162, "m2", { streaming: true, tenant: "t0" }),
    client(198, "m2", { tenant: "t1" }),
    client(345, "m1", { streaming: true, tenant: "t0" }),
    client(0, "m1", { streaming: true, tenant: "t1" }),
    client(750, "m1", { streaming: true, tenant: "t1" }),
    client(750, "m1", { streaming: true, tenant: "t0" }),
    client(855, "m1", { tenant: "t0" }),
    client(1119, "m2", { tenant: "t0" }),
  ],
});

/**
 * Found by a sweep with seed 42 (fairnessBound): a newcomer for a model whose
 * queued requests all wait for another worker (they avoid the one that refused
 * them) left the queue at once; the core counted its tenant's turn, the
 * observer did not. An observer fix (issue 14).
 */
const newcomerThroughQueue: Scenario = swept({
  name: "regression_newcomer_through_queue",
  faultsEndMs: 5029,
  config: { queueLenMax: 3, heartbeatIntervalMs: 401, tenantQueueLenMax: 2 },
  workers: [
    sweptWorker("w0", ["*"], {
      chunks: [0, 2],
      netDelayMs: [1, 10],
      reconnectAfterMs: 50,
    }),
    sweptWorker("w1", ["*"], {
      chunkGapMs: [5, 190],
      chunks: [0, 4],
      netDelayMs: [0, 1],
    }),
    sweptWorker("w2", ["m2"], {
      maxConcurrent: 3,
      firstChunkMs: [5, 271],
      chunkGapMs: [5, 6],
      chunks: [0, 5],
      netDelayMs: [0, 9],
      faults: [{ kind: "errorReplies", num: 3, den: 4 }],
      extensions: ["body-chunks-v1"],
    }),
  ],
  clients: [
    client(154, "m2", { streaming: true, tenant: "t0" }),
    client(1077, "m2", { tenant: "t2" }),
    client(0, "m1", { tenant: "t1" }),
    client(0, "m1", { tenant: "t1" }),
    client(0, "m2", { tenant: "t0" }),
    client(154, "m2", { streaming: true, tenant: "t0" }),
    client(155, "m2", { streaming: true, tenant: "t1" }),
    client(834, "m2", { tenant: "t0" }),
    client(1, "nope", { streaming: true, tenant: "t0" }),
    client(800, "m2", { tenant: "t2" }),
    client(1, "m1", { streaming: true, tenant: "t0" }),
    client(1048, "nope", { tenant: "t0" }),
    client(1000, "m2", { streaming: true, tenant: "t0" }),
    client(736, "m1", { streaming: true, tenant: "t1" }),
    client(736, "m1", { streaming: true, tenant: "t0" }),
    client(1047, "m1", { streaming: true, tenant: "t0" }),
  ],
});

/**
 * Found by a sweep with seed 1 (fifo): a request refused by one worker waited
 * for the only other worker serving its model; that one was drained, which did
 * not move the queue, so a newcomer went ahead of it (issue 14).
 */
const drainMovesAvoidingQueue: Scenario = swept({
  name: "regression_drain_moves_avoiding_queue",
  tickMs: 500,
  faultsEndMs: 4399,
  config: {
    queueLenMax: 2,
    heartbeatIntervalMs: 994,
    heartbeatTimeoutMs: 994,
    tenantQueueLenMax: 1,
    priorityWeights: { high: 1, normal: 1, low: 1 },
    affinityLoadMargin: 0,
    lifecycleTaskTimeoutMs: 300,
  },
  workers: [
    sweptWorker("w0", ["m3"]),
    sweptWorker("w1", ["m2"]),
    sweptWorker("w2", ["m1", "m3"], {
      maxConcurrent: 2,
      firstChunkMs: [86, 244],
      netDelayMs: [0, 1],
      reconnectAfterMs: 207,
      faults: [{ kind: "drainAt", atMs: 1569 }, { kind: "signalAt", atMs: 58 }],
    }),
    sweptWorker("w3", ["*"]),
    sweptWorker("w4", ["m1", "m3"], {
      maxConcurrent: 2,
      firstChunkMs: [5, 15],
      chunkGapMs: [5, 6],
      chunks: [1, 4],
      netDelayMs: [6, 8],
      reconnectAfterMs: 50,
      lifecycle: sweptLifecycle({ extensions: ["capabilities-v1"] }),
      backend: sweptBackend({
        refuseNum: 1,
        resetNum: 1,
        slowNum: 1,
        slowMs: [500, 501],
      }),
    }),
  ],
  clients: [
    client(1569, "m1", { tenant: "t0", priority: "high" }),
    client(79, "m1", { tenant: "t0", priority: "high" }),
    client(57, "m1", { tenant: "t1", priority: "high" }),
    client(1000, "m1", { streaming: true, tenant: "t1", priority: "high" }),
    client(59, "m1", { streaming: true, tenant: "t1", priority: "high" }),
    client(1409, "m1", { tenant: "t1", priority: "high" }),
    client(96, "m1", { streaming: true, tenant: "t0", priority: "high" }),
    client(57, "m1", { tenant: "t1", priority: "high" }),
    client(1500, "m1", { tenant: "t1", priority: "low" }),
  ],
  operators: [
    sweptOperators({ toMs: 4399 }),
  ],
});

/**
 * Found by a sweep with seed 5 (cacheAffinity): a half-open worker's in-flight
 * request was cancelled (timeout) in the tick its trial came due; the cancel did
 * not re-file the worker, so it stayed out of routing (issue 14).
 */
const cancelRefilesTrial: Scenario = swept({
  name: "regression_cancel_refiles_trial",
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

/**
 * Found by a sweep with seed 8 (fifo): a client left while its request was the
 * only one on a half-open worker; the cancel made the worker routable but did
 * not move the queue, so a newcomer overtook a queued request (issue 14).
 */
const cancelMovesQueueToTrial: Scenario = swept({
  name: "regression_cancel_moves_queue_to_trial",
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
  operators: [
    sweptOperators({ toMs: 2614 }),
  ],
});

/**
 * Found by a sweep with seed 11 (maxConcurrent): an original worker answered a
 * cancelled request with an oversized response_complete; the core freed the
 * slot, the observer did not. An observer fix (issue 14).
 */
const oversizedAckFreesSlot: Scenario = swept({
  name: "regression_oversized_ack_frees_slot",
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
  operators: [
    sweptOperators({ toMs: 5325 }),
  ],
});

/**
 * Found by a sweep with seed 37 (fifo): an original worker acknowledged a
 * cancel with an oversized response_complete; the slot was freed but the queue
 * did not move, so a newcomer took it ahead of a queued request (issue 14).
 */
const oversizedAckMovesQueue: Scenario = swept({
  name: "regression_oversized_ack_moves_queue",
  faultsEndMs: 5014,
  config: { heartbeatIntervalMs: 301 },
  workers: [
    sweptWorker("w0", ["m1", "m3"], {
      maxConcurrent: 3,
      firstChunkMs: [149, 272],
      chunkGapMs: [5, 48],
      chunks: [2, 3],
      netDelayMs: [0, 16],
      backend: sweptBackend({
        refuseNum: 1,
        resetNum: 2,
        dieMidStreamNum: 1,
        oversizedNum: 3,
        slowNum: 1,
        slowMs: [500, 531],
      }),
    }),
    sweptWorker("w1", ["m3"], {
      reconnectAfterMs: 50,
      faults: [{ kind: "lieLoad", extra: 1 }],
    }),
    sweptWorker("w2", ["m2", "m3"], {
      firstChunkMs: [5, 6],
      chunks: [0, 1],
      netDelayMs: [0, 1],
      reconnectAfterMs: 50,
      faults: [{ kind: "signalAt", atMs: 0 }],
      backend: sweptBackend({ resetNum: 3, slowNum: 1 }),
      extensions: ["body-chunks-v1"],
    }),
  ],
  clients: [
    client(1200, "m1", { priority: "high" }),
    client(1200, "m1", { priority: "high" }),
    client(15, "m1", { priority: "high" }),
    client(930, "m1", { priority: "high" }),
    client(535, "m1", { streaming: true, priority: "high" }),
    client(51, "m2", { priority: "high" }),
    client(303, "m1", { priority: "high" }),
    client(886, "m1", { abortAfterMs: 505, priority: "high" }),
    client(15, "m1", { priority: "high" }),
    client(1195, "m3", { streaming: true, priority: "low" }),
    client(1400, "m1", { priority: "high" }),
    client(0, "m1", { streaming: true, priority: "low" }),
  ],
});

export const REGRESSIONS: Regression[] = [
  {
    scenario: lowBankedCredit,
    seed: 458866187n,
    postmortem:
      "a class blocked on busy workers banked stride credit and then burst ahead of a dispatchable higher class; fixed: markServed lifts every class behind the virtual time to it",
  },
  {
    scenario: affinityToWildcard,
    seed: 100863868n,
    postmortem:
      "cache affinity sent a request to a remembered `*` worker while an exact worker was free (C42); fixed: affinity may prefer a wildcard worker only when the best free one is a wildcard too",
  },
  {
    scenario: floatStride,
    seed: 19n,
    postmortem:
      "stride passes summed 1/weight in floats, so with weights 1:6 six normal steps fell short of one high step and normal got 7 dispatches per high one; fixed: integer strides (lcm of the weights / weight)",
  },
  {
    scenario: trialChunkMovesQueue,
    seed: 2147483634n,
    postmortem:
      "a half-open backend circuit closed on its trial's first chunk without moving the queue, so a newcomer overtook an older queued request; fixed: a circuit that closes pumps the queue",
  },
  {
    scenario: coolDownBeforeDrop,
    seed: 2125822206n,
    postmortem:
      "a heartbeat loss requeued a request before another worker's backend cool-down ended in the same tick, and a wildcard worker got it over the exact one (C42); fixed: cool-downs end first in the tick",
  },
  {
    scenario: newcomerThroughQueue,
    seed: 2125822206n,
    postmortem:
      "a newcomer that went through the queue and left at once (older requests waited for another worker) was not counted as a scheduler turn by the observer; fixed in the observer",
  },
  {
    scenario: drainMovesAvoidingQueue,
    seed: 1994440863n,
    postmortem:
      "draining the only other worker serving a refused request's model did not move the queue, so a newcomer overtook it; fixed: drainWorker pumps the queue",
  },
  {
    scenario: cancelRefilesTrial,
    seed: 1992847323n,
    postmortem:
      "a cancel on a half-open worker did not re-file it, so it stayed out of routing with nothing in flight; fixed: cancelOnWorker syncs the route",
  },
  {
    scenario: cancelMovesQueueToTrial,
    seed: 544219811n,
    postmortem:
      "a client leaving freed a half-open worker's trial without moving the queue, so a newcomer overtook a queued request; fixed: a cancel that frees a trial pumps the queue",
  },
  {
    scenario: oversizedAckFreesSlot,
    seed: 350035383n,
    postmortem:
      "an oversized response_complete acknowledging a cancel freed the slot in the core but not in the observer; fixed in the observer",
  },
  {
    scenario: oversizedAckMovesQueue,
    seed: 71495086n,
    postmortem:
      "an oversized response_complete acknowledging a cancel freed the slot without moving the queue, so a newcomer overtook a queued request; fixed: that path pumps the queue like any acknowledgment",
  },
];
