// A scenario is plain data (FoundationDB's test specs): a load workload, worker
// fleets with failure plans, durations. Everything random inside a run (arrival
// jitter, speeds, delays) is drawn from the run's seed, so `--scenario NAME
// --seed N` is one exact run.
import {
  type Priority,
  type RateLimit,
  SUPPORTED_EXTENSIONS,
  type TokenLimit,
} from "../core/mod.ts";

/** Inclusive integer range [lo, hi]. */
export type Range = readonly [number, number];

export type WorkerFault =
  /** The worker process dies right after sending its k-th chunk on a connection. */
  | { kind: "crashAtChunk"; chunk: number }
  /** The socket drops at this time (network cut). */
  | { kind: "disconnectAt"; atMs: number }
  /** The worker stops answering pings in [fromMs, untilMs). */
  | { kind: "stopPongs"; fromMs: number; untilMs: number }
  /** The operator drains this worker (C28). */
  | { kind: "drainAt"; atMs: number }
  /** The worker advertises a new model list (C26). */
  | { kind: "modelsUpdate"; atMs: number; models: string[] }
  /** The worker sends a malformed frame (C33); `variant` picks which. */
  | { kind: "garbageAt"; atMs: number; variant: number }
  /** The worker sends chunks/completions/errors naming requests it does not hold (C32). */
  | { kind: "foreignFramesAt"; atMs: number; count: number }
  /** A share num/den of its requests end with a scoped `error` frame (C27). */
  | { kind: "errorReplies"; num: number; den: number }
  /** A share num/den of its completions are sent twice (C20). */
  | { kind: "duplicateComplete"; num: number; den: number }
  /** Its pongs report this much more load than it has (C8 live load). */
  | { kind: "lieLoad"; extra: number }
  /** SIGTERM: the worker drains itself (drain-v1 or an empty model list, C29) and exits. */
  | { kind: "signalAt"; atMs: number };

/**
 * The simulated backend's seeded fault plan (issue 14): each request draws one
 * fate, shares num/den; the rest answer normally.
 */
export type BackendPlan = {
  /** Refuses the connection (the worker's backendUnavailable). */
  refuseNum: number;
  /** Accepts, then dies before the first byte (backendUnavailable too). */
  resetNum: number;
  /** Dies after at least one chunk: the worker answers 502 after the stream started. */
  dieMidStreamNum: number;
  /** A non-streaming answer larger than the server's frame limit. */
  oversizedNum: number;
  /** Answers only after `slowMs`. */
  slowNum: number;
  /** Answers 4xx/5xx (streaming or not; a streaming one before any chunk). */
  errorStatusNum: number;
  den: number;
  slowMs: Range;
};

export type WorkerSpec = {
  name: string;
  models: string[];
  maxConcurrent: number;
  connectAtMs: number;
  /** Delay from receiving a request to its first chunk (or completion). */
  firstChunkMs: Range;
  chunkGapMs: Range;
  chunks: Range;
  /** One-way network delay of its frames. */
  netDelayMs: Range;
  /** What it does on `cancel`: acknowledge (C44), stop silently, or keep streaming. */
  onCancel: "ack" | "silent" | "ignore";
  /** After its socket closes for any reason, it reconnects after this delay (null: only in heal). */
  reconnectAfterMs: number | null;
  faults: WorkerFault[];
  /** Spec 004 lifecycle behaviour (issue 9); absent: an original-style worker. */
  lifecycle?: WorkerLifecycle;
  /**
   * Extensions the worker speaks when it has no `lifecycle` spec: null or
   * absent, an original-style worker (no `extensions` field, no frame limit of
   * its own); a list, our worker speaking those.
   */
  extensions?: string[] | null;
  /** Its backend's fault plan (issue 14); absent: a backend that never fails. */
  backend?: BackendPlan;
  /** ENDPOINT_PREFIXES (issue 25): the paths it serves; absent: every path. */
  endpointPrefixes?: string[];
};

/**
 * How a worker speaks the protocol extensions (issue 9). Shares are num/den with
 * `den`; a task's fate is drawn once: crash mid-task, never answer, fail, else
 * complete. Every worker without this spec is original-style: no `extensions`
 * field in register, and it never sends an extension frame.
 */
export type WorkerLifecycle = {
  /** Listed in register.extensions; null: the field is absent (original-style). */
  extensions: string[] | null;
  /** Delay before each progress report of a task. */
  stepMs: Range;
  /** "running" reports before the final one. */
  steps: Range;
  failNum: number;
  hangNum: number;
  crashNum: number;
  den: number;
  /** Sends `capabilities` frames (after register_ack and after each change), even if not negotiated. */
  sendsCapabilities: boolean;
  /** Models its backend can load (capabilities.models.available). */
  available: string[];
};

/** Operators issuing lifecycle operations (`lifecycleRequested`) at random times. */
export type OperatorSpec = {
  count: number;
  fromMs: number;
  toMs: number;
  /** Models named by load / unload / model-scoped flush. */
  models: string[];
  /** Percentages 0..100: load and unload; the rest are cache flushes. */
  loadPct: number;
  unloadPct: number;
  /** Share of operations naming a target worker (by its spec name; resolved to its current connection). */
  targetPct: number;
};

export type ClientSpec = {
  atMs: number;
  model: string;
  streaming: boolean;
  /** Disconnect after receiving this many chunks. */
  abortAfterChunks: number | null;
  /** Disconnect this long after arrival. */
  abortAfterMs: number | null;
  /** The abort is a `clientStalled` (slow reader) instead of a disconnect. */
  stall: boolean;
  /** Spec 004: X-Tenant-ID (absent: the core's "default"). */
  tenant?: string;
  /** Spec 004: X-Priority (absent: "normal"). */
  priority?: Priority;
  /** Spec 004: cache affinity key (X-Cache-Tag). */
  cacheKey?: string;
  /** Issue 25: the path it calls (absent: /v1/chat/completions). */
  path?: string;
  /** Issue 25: its body is not text (only body-bytes-v1 workers can carry it). */
  binary?: boolean;
};

/** A parametric client workload, expanded with the run's seed. */
export type LoadSpec = {
  count: number;
  fromMs: number;
  toMs: number;
  models: string[];
  /** Percentages 0..100. */
  streamingPct: number;
  abortPct: number;
  /** Spec 004: each client picks one of these tenants / priorities / cache keys (absent: none sent). */
  tenants?: string[];
  priorities?: Priority[];
  cacheKeys?: string[];
};

/** The Config fields a scenario may set (plain numbers: timeouts kept short). */
export type ScenarioConfig = {
  queueLenMax?: number;
  queueTimeoutMs?: number;
  requestTimeoutMs?: number;
  heartbeatIntervalMs?: number;
  heartbeatTimeoutMs?: number;
  registerTimeoutMs?: number;
  cancelGraceMs?: number;
  drainTimeoutMs?: number;
  streamCharsMax?: number;
  frameCharsMax?: number;
  maxConcurrentMax?: number;
  /** Spec 004 scheduling and limits. */
  tenantQueueLenMax?: number;
  priorityWeights?: { high: number; normal: number; low: number };
  rateLimits?: Record<string, RateLimit>;
  defaultRateLimit?: RateLimit | null;
  /** Issue 26: token rate limits per tenant and a default token budget. */
  tokenRateLimits?: Record<string, TokenLimit>;
  defaultTokenBudget?: TokenLimit | null;
  affinityLoadMargin?: number;
  /** Issue 9: a lifecycle task part with no final report fails after this long. */
  lifecycleTaskTimeoutMs?: number;
  /** Issue 14: assembled non-streaming bodies and the backend circuit. */
  responseBodyCharsMax?: number;
  backendFailuresMax?: number;
  backendCoolDownMs?: number;
  backendCoolDownMaxMs?: number;
  /** Issue 33.3: a client taking none of its answer for this long is cut. */
  clientWriteTimeoutMs?: number;
};

export type Scenario = {
  name: string;
  /** The period of the `tick` event (virtual ms). */
  tickMs: number;
  /** Faults stop here; then the heal phase: workers recover, ticks go on. */
  faultsEndMs: number;
  config: ScenarioConfig;
  workers: WorkerSpec[];
  clients: ClientSpec[];
  load: LoadSpec[];
  /** Server shutdown (C30) at this time, if set. */
  shutdownAtMs: number | null;
  /** Lifecycle operators (issue 9); absent: none. */
  operators?: OperatorSpec[];
};

/** Short timeouts so runs stay small; a scenario overrides any of them. */
export const SIM_CONFIG_DEFAULTS: Required<ScenarioConfig> = {
  queueLenMax: 20,
  queueTimeoutMs: 3_000,
  requestTimeoutMs: 6_000,
  heartbeatIntervalMs: 1_000,
  heartbeatTimeoutMs: 3_000,
  registerTimeoutMs: 2_000,
  cancelGraceMs: 1_000,
  drainTimeoutMs: 4_000,
  streamCharsMax: 4_000,
  frameCharsMax: 2_000,
  maxConcurrentMax: 16,
  tenantQueueLenMax: 100,
  priorityWeights: { high: 8, normal: 4, low: 1 },
  rateLimits: {},
  defaultRateLimit: null,
  tokenRateLimits: {},
  defaultTokenBudget: null,
  affinityLoadMargin: 2,
  lifecycleTaskTimeoutMs: 3_000,
  responseBodyCharsMax: 6_000,
  backendFailuresMax: 3,
  backendCoolDownMs: 500,
  backendCoolDownMaxMs: 4_000,
  clientWriteTimeoutMs: 2_000,
};

/**
 * A scenario with nothing in it but its name unless overridden: 100 ms ticks,
 * faults until 5 s, the simulator's configuration (`SIM_CONFIG_DEFAULTS`), no
 * workers, clients, load, shutdown or operators.
 */
export function scenario(
  fields: Partial<Scenario> & { name: string },
): Scenario {
  return {
    tickMs: 100,
    faultsEndMs: 5_000,
    config: {},
    workers: [],
    clients: [],
    load: [],
    shutdownAtMs: null,
    ...fields,
  };
}

/** The keys of a scenario's configuration that differ from `SIM_CONFIG_DEFAULTS` (the same run). */
export function configOverrides(c: ScenarioConfig): ScenarioConfig {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(c)) {
    const d = (SIM_CONFIG_DEFAULTS as Record<string, unknown>)[k];
    if (JSON.stringify(v) !== JSON.stringify(d)) out[k] = v;
  }
  return out as ScenarioConfig;
}

export function worker(
  name: string,
  models: string[],
  overrides: Partial<WorkerSpec> = {},
): WorkerSpec {
  return {
    name,
    models,
    maxConcurrent: 2,
    connectAtMs: 0,
    firstChunkMs: [20, 200],
    chunkGapMs: [10, 100],
    chunks: [1, 8],
    netDelayMs: [1, 20],
    onCancel: "ack",
    reconnectAfterMs: null,
    faults: [],
    ...overrides,
  };
}

/**
 * The sweep's floor (issue 34): what fast-check shrinks a random scenario's
 * configuration and workers to, as sim/arbitrary.ts draws each of these from
 * its value upward. A failing sweep prints its scenario against it (`swept`,
 * `sweptWorker`; sim/scenario_source.ts), so a pinned regression names only
 * what differs from where shrinking stops.
 */
export const SWEEP_CONFIG = {
  queueLenMax: 1,
  queueTimeoutMs: 300,
  requestTimeoutMs: 800,
  heartbeatIntervalMs: 300,
  heartbeatTimeoutMs: 900,
  cancelGraceMs: 100,
  drainTimeoutMs: 300,
  streamCharsMax: 40,
} as const satisfies ScenarioConfig;

/** A worker's floor in the sweep: one slot, 5 ms to every chunk, no chunks, no network delay. */
export const SWEEP_WORKER = {
  maxConcurrent: 1,
  firstChunkMs: [5, 5],
  chunkGapMs: [5, 5],
  chunks: [0, 0],
  netDelayMs: [0, 0],
} as const satisfies Partial<WorkerSpec>;

/** A scenario found by the sweep: `scenario` on the sweep's configuration floor. */
export function swept(fields: Partial<Scenario> & { name: string }): Scenario {
  return scenario({ ...fields, config: { ...SWEEP_CONFIG, ...fields.config } });
}

/** A worker of a scenario found by the sweep: `worker` on the sweep's worker floor. */
export function sweptWorker(
  name: string,
  models: string[],
  overrides: Partial<WorkerSpec> = {},
): WorkerSpec {
  return worker(name, models, { ...SWEEP_WORKER, ...overrides });
}

/** A worker's lifecycle in the sweep, at its floor: silent about capabilities, one 10 ms step, nothing available. */
export function sweptLifecycle(
  overrides: Partial<WorkerLifecycle> = {},
): WorkerLifecycle {
  return lifecycle({
    stepMs: [10, 10],
    steps: [0, 0],
    sendsCapabilities: false,
    available: [],
    ...overrides,
  });
}

/** A backend fault plan in the sweep, at its floor: no faults, out of 16, 500 ms slow. */
export function sweptBackend(
  overrides: Partial<BackendPlan> = {},
): BackendPlan {
  return backendPlan({ den: 16, slowMs: [500, 500], ...overrides });
}

/** Lifecycle operators in the sweep, at their floor: one, from 0, every model, nothing asked. */
export function sweptOperators(
  overrides: Partial<OperatorSpec> = {},
): OperatorSpec {
  return operators({
    count: 1,
    fromMs: 0,
    models: ["m1", "m2", "m3", "m4"],
    loadPct: 0,
    unloadPct: 0,
    targetPct: 0,
    ...overrides,
  });
}

/** Every extension our worker speaks (issue 9 and 14): the protocol's one list. */
export const OUR_EXTENSIONS: string[] = [...SUPPORTED_EXTENSIONS];

/** A backend fault plan with every share zero unless overridden. */
export function backendPlan(overrides: Partial<BackendPlan> = {}): BackendPlan {
  return {
    refuseNum: 0,
    resetNum: 0,
    dieMidStreamNum: 0,
    oversizedNum: 0,
    slowNum: 0,
    errorStatusNum: 0,
    den: 10,
    slowMs: [2_000, 8_000],
    ...overrides,
  };
}

/** A worker that negotiates both extensions and answers every task. */
export function lifecycle(
  overrides: Partial<WorkerLifecycle> = {},
): WorkerLifecycle {
  return {
    extensions: ["capabilities-v1", "lifecycle-v1"],
    stepMs: [50, 400],
    steps: [0, 3],
    failNum: 0,
    hangNum: 0,
    crashNum: 0,
    den: 10,
    sendsCapabilities: true,
    available: ["m1", "m2", "m3"],
    ...overrides,
  };
}

export function operators(overrides: Partial<OperatorSpec> = {}): OperatorSpec {
  return {
    count: 20,
    fromMs: 100,
    toMs: 5_000,
    models: ["m1", "m2", "m3"],
    loadPct: 40,
    unloadPct: 30,
    targetPct: 40,
    ...overrides,
  };
}

/** One client at `atMs`: non-streaming, never aborting, unless overridden. */
export function client(
  atMs: number,
  model: string,
  overrides: Partial<ClientSpec> = {},
): ClientSpec {
  return {
    atMs,
    model,
    streaming: false,
    abortAfterChunks: null,
    abortAfterMs: null,
    stall: false,
    ...overrides,
  };
}

export function load(overrides: Partial<LoadSpec> = {}): LoadSpec {
  return {
    count: 40,
    fromMs: 100,
    toMs: 5_000,
    models: ["m1"],
    streamingPct: 50,
    abortPct: 0,
    ...overrides,
  };
}
