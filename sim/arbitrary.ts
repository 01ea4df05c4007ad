// fast-check arbitraries for random exploration: a whole scenario as plain data
// (workers with failure plans, clients, short timeouts) plus the run seed, so a
// failure shrinks to a smaller scenario (conventions §8). Swarm testing: each
// scenario first picks which fault kinds are enabled at all (TigerBeetle).
import fc from "fast-check";
import type {
  ClientSpec,
  Range,
  Scenario,
  WorkerFault,
  WorkerSpec,
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
] as const;
export type SwarmKind = (typeof SWARM_KINDS)[number];

const MODELS = ["m1", "m2", "m3"];

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
    default:
      return null;
  }
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
    maxConcurrent: fc.integer({ min: 1, max: 3 }),
    connectAtMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: endMs })),
    firstChunkMs: range(5, 300, 300),
    chunkGapMs: range(5, 200, 300),
    chunks: range(0, 3, 6),
    netDelayMs: range(0, 10, 30),
    onCancel: fc.constantFrom(...cancel),
    reconnectAfterMs: fc.option(fc.integer({ min: 50, max: 1_500 }), {
      nil: null,
    }),
    faults: faults.length === 0
      ? fc.constant([])
      : fc.array(fc.oneof(...faults), { maxLength: 3, size: "max" }),
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
  });
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
      config: fc.record({
        queueLenMax: fc.integer({ min: 1, max: 10 }),
        queueTimeoutMs: fc.integer({ min: 300, max: 3_000 }),
        requestTimeoutMs: fc.integer({ min: 800, max: 5_000 }),
        heartbeatIntervalMs: fc.integer({ min: 300, max: 1_500 }),
        heartbeatTimeoutMs: fc.integer({ min: 900, max: 4_000 }),
        cancelGraceMs: fc.integer({ min: 100, max: 2_000 }),
        drainTimeoutMs: fc.integer({ min: 300, max: 3_000 }),
        streamCharsMax: fc.integer({ min: 40, max: 2_000 }),
      }),
      workers: fc.tuple(
        ...Array.from({ length: nWorkers }, (_, i) => workerArb(i, on, endMs)),
      ),
      clients: fc.array(clientArb(on, endMs), { maxLength: 60, size: "max" }),
      load: fc.constant([]),
      shutdownAtMs: on.has("shutdown")
        ? fc.option(fc.integer({ min: 0, max: endMs }), { nil: null, freq: 3 })
        : fc.constant(null),
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
  }
  if (
    s.clients.some((c) =>
      c.abortAfterChunks !== null || c.abortAfterMs !== null
    )
  ) kinds.add("clientAbort");
  if (s.shutdownAtMs !== null) kinds.add("shutdown");
  return [...kinds].sort();
}
