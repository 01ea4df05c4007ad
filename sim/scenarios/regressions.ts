// Every bug the simulator found, as a named scenario with a pinned seed and a
// one-line postmortem (sled's tests/00_regression.rs). Tests replay each one.
import type { Scenario } from "../scenario.ts";

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
const lowBankedCredit: Scenario = {
  "name": "regression_low_banked_credit",
  "tickMs": 100,
  "faultsEndMs": 1831,
  "config": {
    "queueLenMax": 2,
    "queueTimeoutMs": 300,
    "requestTimeoutMs": 800,
    "heartbeatIntervalMs": 300,
    "heartbeatTimeoutMs": 900,
    "cancelGraceMs": 100,
    "drainTimeoutMs": 300,
    "streamCharsMax": 40,
    "tenantQueueLenMax": 100,
    "priorityWeights": {
      "high": 1,
      "normal": 1,
      "low": 1,
    },
    "defaultRateLimit": null,
    "rateLimits": {},
    "affinityLoadMargin": 2,
  },
  "workers": [
    {
      "name": "w0",
      "models": [
        "m1",
      ],
      "maxConcurrent": 1,
      "connectAtMs": 0,
      "firstChunkMs": [
        5,
        5,
      ],
      "chunkGapMs": [
        5,
        5,
      ],
      "chunks": [
        0,
        0,
      ],
      "netDelayMs": [
        0,
        1,
      ],
      "onCancel": "ack",
      "reconnectAfterMs": null,
      "faults": [],
    },
    {
      "name": "w1",
      "models": [
        "*",
      ],
      "maxConcurrent": 1,
      "connectAtMs": 116,
      "firstChunkMs": [
        5,
        5,
      ],
      "chunkGapMs": [
        5,
        5,
      ],
      "chunks": [
        0,
        0,
      ],
      "netDelayMs": [
        3,
        12,
      ],
      "onCancel": "ack",
      "reconnectAfterMs": null,
      "faults": [],
    },
    {
      "name": "w2",
      "models": [
        "*",
      ],
      "maxConcurrent": 1,
      "connectAtMs": 0,
      "firstChunkMs": [
        5,
        5,
      ],
      "chunkGapMs": [
        5,
        87,
      ],
      "chunks": [
        0,
        3,
      ],
      "netDelayMs": [
        0,
        0,
      ],
      "onCancel": "ack",
      "reconnectAfterMs": 50,
      "faults": [],
    },
  ],
  "clients": [
    {
      "atMs": 0,
      "model": "m1",
      "streaming": false,
      "abortAfterChunks": null,
      "abortAfterMs": null,
      "stall": false,
      "priority": "high",
    },
    {
      "atMs": 117,
      "model": "m1",
      "streaming": false,
      "abortAfterChunks": null,
      "abortAfterMs": null,
      "stall": false,
      "priority": "high",
    },
    {
      "atMs": 0,
      "model": "m1",
      "streaming": false,
      "abortAfterChunks": null,
      "abortAfterMs": null,
      "stall": false,
      "priority": "high",
    },
    {
      "atMs": 1,
      "model": "m1",
      "streaming": true,
      "abortAfterChunks": null,
      "abortAfterMs": null,
      "stall": false,
      "priority": "high",
    },
    {
      "atMs": 123,
      "model": "nope",
      "streaming": false,
      "abortAfterChunks": null,
      "abortAfterMs": null,
      "stall": false,
      "priority": "high",
    },
    {
      "atMs": 126,
      "model": "m1",
      "streaming": false,
      "abortAfterChunks": null,
      "abortAfterMs": null,
      "stall": false,
      "priority": "low",
    },
    {
      "atMs": 6,
      "model": "m2",
      "streaming": false,
      "abortAfterChunks": null,
      "abortAfterMs": null,
      "stall": false,
      "priority": "low",
    },
    {
      "atMs": 117,
      "model": "m1",
      "streaming": false,
      "abortAfterChunks": null,
      "abortAfterMs": null,
      "stall": false,
      "priority": "high",
    },
  ],
  "load": [],
  "shutdownAtMs": null,
};

/**
 * Found by the fixed-seed sweep (eligibleWorker), shrunk: r0 with cache key k1
 * was served by a wildcard worker (the only one up); r1 with the same key then
 * went to that `*` worker by affinity although w2, which acked m2 exactly, was
 * free at the same load (C42: `*` only when no exact match is free).
 */
const affinityToWildcard: Scenario = {
  "name": "regression_affinity_to_wildcard",
  "tickMs": 100,
  "faultsEndMs": 4865,
  "config": {
    "queueLenMax": 1,
    "queueTimeoutMs": 300,
    "requestTimeoutMs": 800,
    "heartbeatIntervalMs": 300,
    "heartbeatTimeoutMs": 900,
    "cancelGraceMs": 100,
    "drainTimeoutMs": 300,
    "streamCharsMax": 40,
    "tenantQueueLenMax": 1,
    "priorityWeights": {
      "high": 8,
      "normal": 4,
      "low": 1,
    },
    "defaultRateLimit": null,
    "rateLimits": {},
    "affinityLoadMargin": 0,
  },
  "workers": [
    {
      "name": "w0",
      "models": [
        "*",
      ],
      "maxConcurrent": 1,
      "connectAtMs": 0,
      "firstChunkMs": [
        5,
        5,
      ],
      "chunkGapMs": [
        5,
        5,
      ],
      "chunks": [
        0,
        0,
      ],
      "netDelayMs": [
        0,
        0,
      ],
      "onCancel": "ack",
      "reconnectAfterMs": 50,
      "faults": [],
    },
    {
      "name": "w1",
      "models": [
        "m3",
      ],
      "maxConcurrent": 1,
      "connectAtMs": 0,
      "firstChunkMs": [
        5,
        5,
      ],
      "chunkGapMs": [
        5,
        5,
      ],
      "chunks": [
        0,
        0,
      ],
      "netDelayMs": [
        0,
        0,
      ],
      "onCancel": "ack",
      "reconnectAfterMs": null,
      "faults": [],
    },
    {
      "name": "w2",
      "models": [
        "m2",
        "*",
      ],
      "maxConcurrent": 1,
      "connectAtMs": 0,
      "firstChunkMs": [
        5,
        5,
      ],
      "chunkGapMs": [
        5,
        5,
      ],
      "chunks": [
        0,
        0,
      ],
      "netDelayMs": [
        0,
        0,
      ],
      "onCancel": "ack",
      "reconnectAfterMs": 50,
      "faults": [],
    },
  ],
  "clients": [
    {
      "atMs": 0,
      "model": "m2",
      "streaming": false,
      "abortAfterChunks": null,
      "abortAfterMs": null,
      "stall": false,
      "tenant": "t1",
      "cacheKey": "k1",
    },
    {
      "atMs": 6,
      "model": "m2",
      "streaming": false,
      "abortAfterChunks": null,
      "abortAfterMs": null,
      "stall": false,
      "tenant": "t1",
      "cacheKey": "k1",
    },
  ],
  "load": [],
  "shutdownAtMs": null,
};

/**
 * Found by the fixed-seed sweep (priorityOrder), shrunk: with weights high 1,
 * normal 6 the normal class's pass grew by 1/6 in floats; six steps summed to
 * 0.9999999999999999, short of high's 1, so normal won a 7th dispatch ahead of a
 * dispatchable high request where the weights allow 6 (ties go to the higher class).
 */
const floatStride: Scenario = {
  "name": "regression_float_stride",
  "tickMs": 100,
  "faultsEndMs": 2484,
  "config": {
    "queueLenMax": 2,
    "queueTimeoutMs": 300,
    "requestTimeoutMs": 800,
    "heartbeatIntervalMs": 300,
    "heartbeatTimeoutMs": 900,
    "cancelGraceMs": 100,
    "drainTimeoutMs": 300,
    "streamCharsMax": 40,
    "tenantQueueLenMax": 2,
    "priorityWeights": {
      "high": 1,
      "normal": 6,
      "low": 1,
    },
    "defaultRateLimit": null,
    "rateLimits": {},
    "affinityLoadMargin": 2,
  },
  "workers": [
    {
      "name": "w0",
      "models": [
        "*",
      ],
      "maxConcurrent": 2,
      "connectAtMs": 0,
      "firstChunkMs": [
        6,
        6,
      ],
      "chunkGapMs": [
        5,
        5,
      ],
      "chunks": [
        0,
        0,
      ],
      "netDelayMs": [
        0,
        0,
      ],
      "onCancel": "ack",
      "reconnectAfterMs": 50,
      "faults": [
        {
          "kind": "disconnectAt",
          "atMs": 19,
        },
      ],
    },
  ],
  "clients": [
    {
      "atMs": 13,
      "model": "m1",
      "streaming": false,
      "abortAfterChunks": null,
      "abortAfterMs": null,
      "stall": false,
      "tenant": "t0",
      "priority": "normal",
    },
    {
      "atMs": 13,
      "model": "nope",
      "streaming": false,
      "abortAfterChunks": null,
      "abortAfterMs": null,
      "stall": false,
      "tenant": "t1",
      "priority": "high",
    },
    {
      "atMs": 76,
      "model": "m1",
      "streaming": false,
      "abortAfterChunks": null,
      "abortAfterMs": null,
      "stall": false,
      "tenant": "t1",
      "priority": "normal",
    },
    {
      "atMs": 87,
      "model": "m1",
      "streaming": false,
      "abortAfterChunks": null,
      "abortAfterMs": null,
      "stall": false,
      "tenant": "t0",
    },
    {
      "atMs": 13,
      "model": "m1",
      "streaming": false,
      "abortAfterChunks": null,
      "abortAfterMs": null,
      "stall": false,
      "tenant": "t1",
    },
    {
      "atMs": 91,
      "model": "m1",
      "streaming": false,
      "abortAfterChunks": null,
      "abortAfterMs": null,
      "stall": false,
      "tenant": "t1",
      "priority": "normal",
    },
    {
      "atMs": 0,
      "model": "m1",
      "streaming": false,
      "abortAfterChunks": null,
      "abortAfterMs": null,
      "stall": false,
      "tenant": "t0",
      "priority": "high",
    },
    {
      "atMs": 18,
      "model": "m1",
      "streaming": false,
      "abortAfterChunks": null,
      "abortAfterMs": null,
      "stall": false,
      "tenant": "t0",
      "priority": "normal",
    },
    {
      "atMs": 1,
      "model": "m1",
      "streaming": false,
      "abortAfterChunks": null,
      "abortAfterMs": null,
      "stall": false,
      "tenant": "t0",
      "priority": "high",
    },
  ],
  "load": [],
  "shutdownAtMs": null,
};

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
];
