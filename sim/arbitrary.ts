// fast-check arbitraries for random exploration: a whole scenario as plain data
// (workers with failure plans, clients, short timeouts) plus the run seed, so a
// failure shrinks to a smaller scenario (conventions §8). Swarm testing: each
// scenario first picks which fault kinds are enabled at all (TigerBeetle), and
// which spec 004 features (tenants, priorities, cache keys, rate limits, odd
// weights): runs without them stay single-tenant, single-class as before.
import fc from "fast-check";
import type { Priority, RateLimit, TokenLimit } from "../core/mod.ts";
import { EXTENSION_CAPABILITIES, EXTENSION_LIFECYCLE } from "../core/mod.ts";
import {
  type BackendPlan,
  type ClientSpec,
  LoadSpec,
  OperatorSpec,
  OUR_EXTENSIONS,
  type Range,
  type Scenario,
  type ScenarioConfig,
  SWEEP_CONFIG,
  SWEEP_WORKER,
  type WorkerFault,
  type WorkerLifecycle,
  type WorkerSpec,
} from "./scenario.ts";

export const SWARM_KINDS = [
  "crashAtChunk",
  "disconnectAt",
  "stopPongs",
  "drainAt",
  "modelsUpdate",
  "garbageAt",
  "foreignFramesAt",
  "errorReplies",
  "duplicateComplete",
  "lieLoad",
  "cancelSilent",
  "cancelIgnore",
  "clientAbort",
  "wildcard",
  "shutdown",
  "tenants",
  "priorities",
  "cacheKeys",
  "rateLimits",
  "weights",
  "lifecycle",
  "backendFaults",
  "signal",
  "ourWorkers",
  "endpoints",
] as const;
export type SwarmKind = (typeof SWARM_KINDS)[number];

const MODELS = ["m1", "m2", "m3"];
/** t0 is the noisy one: it sends about half of all requests. */
const TENANTS = ["t0", "t1", "t2", "t3"];
const PRIORITIES: Priority[] = ["high", "normal", "low"];
const CACHE_KEYS = ["k1", "k2", "k3"];
/** Issue 25: the paths clients call and the prefixes workers serve. */
const PATHS = ["/v1/chat/completions", "/v1/embeddings", "/v1/audio/speech"];
const PREFIX_LISTS: string[][] = [
  [],
  [],
  ["/v1/chat/"],
  ["/v1/embeddings"],
  ["/v1/chat/", "/v1/embeddings"],
  ["/v1/audio/"],
];

function upTo(min: number, max: number): fc.Arbitrary<number> {
  return fc.integer({ min, max });
}

function range(lo: number, hi: number, spanMax: number): fc.Arbitrary<Range> {
  return fc.tuple(
    fc.integer({ min: lo, max: hi }),
    fc.integer({ min: 0, max: spanMax }),
  )
    .map(([a, d]) => [a, a + d] as const);
}

function faultArb(
  kind: SwarmKind,
  endMs: number,
): fc.Arbitrary<WorkerFault> | null {
  const at = fc.integer({ min: 0, max: endMs });
  switch (kind) {
    case "crashAtChunk":
      return fc.integer({ min: 1, max: 6 }).map((chunk) => ({
        kind: "crashAtChunk",
        chunk,
      }));
    case "disconnectAt":
      return at.map((atMs) => ({ kind: "disconnectAt", atMs }));
    case "stopPongs":
      return fc.tuple(at, fc.integer({ min: 500, max: 6_000 }))
        .map(([fromMs, d]) => ({
          kind: "stopPongs",
          fromMs,
          untilMs: fromMs + d,
        }));
    case "drainAt":
      return at.map((atMs) => ({ kind: "drainAt", atMs }));
    case "modelsUpdate":
      return fc.tuple(at, fc.subarray([...MODELS, "*", " m1 ", ""]))
        .map(([atMs, models]) => ({ kind: "modelsUpdate", atMs, models }));
    case "garbageAt":
      return fc.tuple(at, fc.nat(9)).map(([atMs, variant]) => ({
        kind: "garbageAt",
        atMs,
        variant,
      }));
    case "foreignFramesAt":
      return fc.tuple(at, fc.integer({ min: 1, max: 8 }))
        .map(([atMs, count]) => ({ kind: "foreignFramesAt", atMs, count }));
    case "errorReplies":
      return fc.integer({ min: 1, max: 4 }).map((num) => ({
        kind: "errorReplies",
        num,
        den: 4,
      }));
    case "duplicateComplete":
      return fc.integer({ min: 1, max: 4 }).map((num) => ({
        kind: "duplicateComplete",
        num,
        den: 4,
      }));
    case "lieLoad":
      return fc.integer({ min: 1, max: 3 }).map((extra) => ({
        kind: "lieLoad",
        extra,
      }));
    case "signal":
      return at.map((atMs) => ({ kind: "signalAt", atMs }));
    default:
      return null;
  }
}

/** Issue 14: a backend's fault plan (shares out of 10). */
function backendPlanArb(): fc.Arbitrary<BackendPlan> {
  const share = fc.integer({ min: 0, max: 3 });
  return fc.record({
    refuseNum: share,
    resetNum: share,
    dieMidStreamNum: share,
    oversizedNum: share,
    slowNum: fc.integer({ min: 0, max: 2 }),
    errorStatusNum: share,
    den: fc.constant(16),
    slowMs: range(500, 3_000, 4_000),
  });
}

/** Issue 14: what a worker without a lifecycle spec speaks (null: original-style). */
const OUR_LISTS: (string[] | null)[] = [
  null,
  OUR_EXTENSIONS,
  ["drain-v1"],
  ["body-chunks-v1"],
];

/** What a worker lists in register.extensions (null: original-style, no field). */
const EXTENSION_LISTS: (string[] | null)[] = [
  null,
  [],
  [EXTENSION_CAPABILITIES],
  [EXTENSION_LIFECYCLE],
  [EXTENSION_CAPABILITIES, EXTENSION_LIFECYCLE],
  [EXTENSION_LIFECYCLE, "x-future-v9"],
];

/** Issue 9: how a worker speaks the extensions (null: original-style, silent). */
function lifecycleArb(): fc.Arbitrary<WorkerLifecycle | null> {
  return fc.option(
    fc.record({
      extensions: fc.constantFrom(...EXTENSION_LISTS),
      stepMs: range(10, 500, 800),
      steps: range(0, 2, 3),
      failNum: fc.integer({ min: 0, max: 3 }),
      hangNum: fc.integer({ min: 0, max: 2 }),
      crashNum: fc.integer({ min: 0, max: 2 }),
      den: fc.constant(10),
      sendsCapabilities: fc.boolean(),
      available: fc.subarray([...MODELS, "m4"]),
    }),
    { nil: null, freq: 4 },
  );
}

function operatorArb(endMs: number): fc.Arbitrary<OperatorSpec> {
  return fc.record({
    count: fc.integer({ min: 1, max: 15 }),
    fromMs: fc.constant(0),
    toMs: fc.constant(endMs),
    models: fc.constant([...MODELS, "m4"]),
    loadPct: fc.integer({ min: 0, max: 60 }),
    unloadPct: fc.integer({ min: 0, max: 40 }),
    targetPct: fc.integer({ min: 0, max: 100 }),
  });
}

function workerArb(
  i: number,
  on: ReadonlySet<SwarmKind>,
  endMs: number,
): fc.Arbitrary<WorkerSpec> {
  const faults = [...on].map((k) => faultArb(k, endMs)).filter((a) =>
    a !== null
  );
  const cancel: WorkerSpec["onCancel"][] = ["ack"];
  if (on.has("cancelSilent")) cancel.push("silent");
  if (on.has("cancelIgnore")) cancel.push("ignore");
  return fc.record({
    name: fc.constant(`w${i}`),
    models: fc.subarray(on.has("wildcard") ? [...MODELS, "*"] : MODELS, {
      minLength: 1,
    }),
    maxConcurrent: fc.integer({ min: SWEEP_WORKER.maxConcurrent, max: 3 }),
    connectAtMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: endMs })),
    // From the floor up (SWEEP_WORKER): what a shrunk worker prints against.
    firstChunkMs: range(SWEEP_WORKER.firstChunkMs[0], 300, 300),
    chunkGapMs: range(SWEEP_WORKER.chunkGapMs[0], 200, 300),
    chunks: range(SWEEP_WORKER.chunks[0], 3, 6),
    netDelayMs: range(SWEEP_WORKER.netDelayMs[0], 10, 30),
    onCancel: fc.constantFrom(...cancel),
    reconnectAfterMs: fc.option(fc.integer({ min: 50, max: 1_500 }), {
      nil: null,
    }),
    faults: faults.length === 0
      ? fc.constant<WorkerFault[]>([])
      : fc.array(fc.oneof(...faults), { maxLength: 3, size: "max" }),
    lifecycle: on.has("lifecycle") ? lifecycleArb() : fc.constant(null),
    backend: on.has("backendFaults")
      ? fc.option(backendPlanArb(), { nil: null, freq: 3 })
      : fc.constant(null),
    extensions: on.has("ourWorkers")
      ? fc.constantFrom(...OUR_LISTS)
      : fc.constant(null),
    endpointPrefixes: on.has("endpoints")
      ? fc.constantFrom(...PREFIX_LISTS)
      : fc.constant<string[]>([]),
  }).map(({ lifecycle, backend, extensions, endpointPrefixes, ...base }) => {
    const w: WorkerSpec = base;
    if (lifecycle !== null) w.lifecycle = lifecycle;
    if (backend !== null) w.backend = backend;
    if (extensions !== null) w.extensions = extensions;
    if (endpointPrefixes.length > 0) {
      w.endpointPrefixes = [...endpointPrefixes];
    }
    return w;
  });
}

function clientArb(
  on: ReadonlySet<SwarmKind>,
  endMs: number,
): fc.Arbitrary<ClientSpec> {
  const abort = on.has("clientAbort");
  return fc.record({
    atMs: fc.integer({ min: 0, max: endMs }),
    model: fc.oneof({ weight: 12, arbitrary: fc.constantFrom(...MODELS) }, {
      weight: 1,
      arbitrary: fc.constant("nope"),
    }),
    streaming: fc.boolean(),
    abortAfterChunks: abort
      ? fc.option(fc.integer({ min: 1, max: 4 }), { nil: null, freq: 2 })
      : fc.constant(null),
    abortAfterMs: abort
      ? fc.option(fc.integer({ min: 0, max: 3_000 }), { nil: null, freq: 2 })
      : fc.constant(null),
    stall: abort ? fc.boolean() : fc.constant(false),
    tenant: on.has("tenants")
      ? fc.oneof({ weight: 3, arbitrary: fc.constant(TENANTS[0]!) }, {
        weight: 3,
        arbitrary: fc.constantFrom(...TENANTS.slice(1)),
      })
      : fc.constant(null),
    priority: on.has("priorities")
      ? fc.constantFrom<Priority | null>(...PRIORITIES, null)
      : fc.constant(null),
    cacheKey: on.has("cacheKeys")
      ? fc.option(fc.constantFrom(...CACHE_KEYS), { nil: null, freq: 3 })
      : fc.constant(null),
    // Mostly chat even then, so the scheduling invariants keep their traffic.
    path: on.has("endpoints")
      ? fc.oneof({ weight: 4, arbitrary: fc.constant(PATHS[0]!) }, {
        weight: 2,
        arbitrary: fc.constantFrom(...PATHS.slice(1)),
      })
      : fc.constant(PATHS[0]!),
    binary: on.has("endpoints")
      ? fc.integer({ min: 0, max: 3 }).map((n) => n === 0)
      : fc.constant(false),
  }).map(({ tenant, priority, cacheKey, path, binary, ...base }) => {
    // Absent fields, not undefined ones: the core's own defaults apply.
    const c: ClientSpec = base;
    if (tenant !== null) c.tenant = tenant;
    if (priority !== null) c.priority = priority;
    if (cacheKey !== null) c.cacheKey = cacheKey;
    if (path !== PATHS[0]) c.path = path;
    if (binary) c.binary = true;
    return c;
  });
}

function rateLimitArb(): fc.Arbitrary<RateLimit> {
  return fc.record({
    limit: fc.integer({ min: 1, max: 8 }),
    windowMs: fc.integer({ min: 100, max: 3_000 }),
  });
}

/**
 * Issue 26: token limits derived from the request limits already drawn (a
 * `map` draws nothing, so every seed keeps the scenario it had): about eight
 * tokens a request, near what an answer here uses (3 prompt tokens plus one a
 * chunk), so either limit may bind first.
 */
function withTokenLimits(c: ScenarioConfig): ScenarioConfig {
  const tokenRateLimits: Record<string, TokenLimit> = {};
  for (const [tenant, l] of Object.entries(c.rateLimits ?? {})) {
    tokenRateLimits[tenant] = { tokens: l.limit * 8, windowMs: l.windowMs };
  }
  const d = c.defaultRateLimit ?? null;
  return {
    ...c,
    tokenRateLimits,
    defaultTokenBudget: d === null
      ? null
      : { tokens: d.limit * 20, windowMs: d.windowMs * 3 },
  };
}

/** Spec 004 settings for the features the swarm turned on. */
function config004Arb(
  on: ReadonlySet<SwarmKind>,
): fc.Arbitrary<ScenarioConfig> {
  const weight = fc.integer({ min: 1, max: 9 });
  return fc.record({
    tenantQueueLenMax: on.has("tenants")
      ? fc.integer({ min: 1, max: 10 })
      : fc.constant(100),
    priorityWeights: on.has("weights")
      ? fc.record({ high: weight, normal: weight, low: weight })
      : fc.constant({ high: 8, normal: 4, low: 1 }),
    defaultRateLimit: on.has("rateLimits")
      ? fc.option(rateLimitArb(), { nil: null })
      : fc.constant(null),
    rateLimits: on.has("rateLimits")
      ? fc.dictionary(fc.constantFrom(...TENANTS, "default"), rateLimitArb(), {
        maxKeys: 3,
      })
      : fc.constant({}),
    affinityLoadMargin: on.has("cacheKeys")
      ? fc.integer({ min: 0, max: 3 })
      : fc.constant(2),
    lifecycleTaskTimeoutMs: on.has("lifecycle")
      ? fc.integer({ min: 300, max: 4_000 })
      : fc.constant(3_000),
  }).map(withTokenLimits);
}

/** A random scenario, small enough for thousands per minute. */
export function scenarioArb(): fc.Arbitrary<Scenario> {
  return fc.tuple(
    fc.subarray([...SWARM_KINDS]),
    fc.integer({ min: 1_000, max: 6_000 }),
    fc.integer({ min: 1, max: 5 }),
  ).chain(([kinds, endMs, nWorkers]) => {
    const on = new Set(kinds);
    return fc.record({
      name: fc.constant("random"),
      tickMs: fc.constantFrom(100, 250, 500),
      faultsEndMs: fc.constant(endMs),
      config: fc.tuple(
        // From the floor up (SWEEP_CONFIG): what a shrunk scenario prints against.
        fc.record({
          queueLenMax: upTo(SWEEP_CONFIG.queueLenMax, 10),
          queueTimeoutMs: upTo(SWEEP_CONFIG.queueTimeoutMs, 3_000),
          requestTimeoutMs: upTo(SWEEP_CONFIG.requestTimeoutMs, 5_000),
          heartbeatIntervalMs: upTo(SWEEP_CONFIG.heartbeatIntervalMs, 1_500),
          heartbeatTimeoutMs: upTo(SWEEP_CONFIG.heartbeatTimeoutMs, 4_000),
          cancelGraceMs: upTo(SWEEP_CONFIG.cancelGraceMs, 2_000),
          drainTimeoutMs: upTo(SWEEP_CONFIG.drainTimeoutMs, 3_000),
          streamCharsMax: upTo(SWEEP_CONFIG.streamCharsMax, 2_000),
        }),
        config004Arb(on),
      ).map(([a, b]) => ({ ...a, ...b })),
      workers: fc.tuple(
        ...Array.from({ length: nWorkers }, (_, i) => workerArb(i, on, endMs)),
      ),
      clients: fc.array(clientArb(on, endMs), { maxLength: 60, size: "max" }),
      load: fc.constant<LoadSpec[]>([]),
      shutdownAtMs: on.has("shutdown")
        ? fc.option(fc.integer({ min: 0, max: endMs }), { nil: null, freq: 3 })
        : fc.constant(null),
      operators: on.has("lifecycle")
        ? fc.array(operatorArb(endMs), { minLength: 1, maxLength: 2 })
        : fc.constant<OperatorSpec[]>([]),
    }).map(({ operators, ...base }) => {
      const s: Scenario = base;
      if (operators.length > 0) s.operators = operators;
      return s;
    });
  });
}

/** The fault kinds a scenario actually uses (for the swarm log line and statistics). */
export function swarmOf(s: Scenario): string[] {
  const kinds = new Set<string>();
  for (const w of s.workers) {
    for (const f of w.faults) kinds.add(f.kind);
    if (w.onCancel !== "ack") kinds.add(`cancel-${w.onCancel}`);
    if (w.models.includes("*")) kinds.add("wildcard");
    if (w.backend !== undefined) kinds.add("backendFaults");
    if (w.extensions != null) kinds.add("ourWorkers");
    if (w.endpointPrefixes !== undefined) kinds.add("endpoints");
  }
  if (
    s.clients.some((c) =>
      c.abortAfterChunks !== null || c.abortAfterMs !== null
    )
  ) kinds.add("clientAbort");
  if (s.shutdownAtMs !== null) kinds.add("shutdown");
  if (s.clients.some((c) => c.tenant !== undefined)) kinds.add("tenants");
  if (s.clients.some((c) => c.priority !== undefined)) kinds.add("priorities");
  if (s.clients.some((c) => c.cacheKey !== undefined)) kinds.add("cacheKeys");
  if (s.clients.some((c) => c.path !== undefined || c.binary === true)) {
    kinds.add("endpoints");
  }
  if (
    s.config.defaultRateLimit != null ||
    Object.keys(s.config.rateLimits ?? {}).length > 0
  ) kinds.add("rateLimits");
  if (
    s.workers.some((w) => w.lifecycle !== undefined) ||
    (s.operators ?? []).length > 0
  ) kinds.add("lifecycle");
  const w = s.config.priorityWeights;
  if (w !== undefined && (w.high !== 8 || w.normal !== 4 || w.low !== 1)) {
    kinds.add("weights");
  }
  return [...kinds].sort();
}
