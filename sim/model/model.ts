// The observer's model of the relay: a deliberately simpler copy of what the
// core tracks (per request: open or ended, queued or on which worker, chunks
// seen; per worker: acked models, slots, draining; the queue's lanes, the
// tenants' rate windows, lifecycle tasks), fed with every event and effect by
// sim/observer/observer.ts. Nothing here checks anything: the invariants (sim/invariants/)
// read this model and report.
import type {
  Config,
  Effect,
  Event,
  LifecycleOperation,
  LifecycleStatus,
  Priority,
} from "../../core/mod.ts";
import { EXTENSION_BODY_BYTES, EXTENSION_LIFECYCLE } from "../../core/mod.ts";
import type { StreamHead } from "../../core/vocabulary.ts";

/** The priority classes, highest first. */
export const CLASSES: readonly Priority[] = ["high", "normal", "low"];

/** At a dispatch of `r` from the queue: what else waits that a free worker could take. */
export type Readiness = {
  /** Classes with a dispatchable request. */
  classReady: Set<Priority>;
  /** Tenants of r's class with a dispatchable request, and one such request each. */
  tenantsReady: Map<string, string>;
};

/** The limits the observer judges by: the core's own, read from the run's configuration. */
const OBSERVED_CONFIG = [
  "queueLenMax",
  "queueTimeoutMs",
  "requestTimeoutMs",
  "requeueCountMax",
  "cancelGraceMs",
  "drainTimeoutMs",
  "maxConcurrentMax",
  "modelsPerWorkerMax",
  "modelNameCharsMax",
  "tenantQueueLenMax",
  "priorityWeights",
  "rateLimits",
  "defaultRateLimit",
  "tokenRateLimits",
  "defaultTokenBudget",
  "affinityLoadMargin",
  "lifecycleTaskTimeoutMs",
  "backendFailuresMax",
  "backendCoolDownMs",
  "backendCoolDownMaxMs",
] as const;

export type ObserverConfig = Pick<Config, (typeof OBSERVED_CONFIG)[number]>;

/**
 * The observer's configuration, derived from the run's (sim/run_scenario.ts
 * `simConfig`). A copy: a mutant core that swaps its own limits
 * (sim/mutants.ts) must still be judged by the scenario's.
 */
export function observerConfigOf(config: Config): ObserverConfig {
  const out: Partial<Record<keyof ObserverConfig, unknown>> = {};
  for (const k of OBSERVED_CONFIG) out[k] = structuredClone(config[k]);
  return out as ObserverConfig;
}

/** The observer's copy of a worker's backend circuit (core/state/backend_circuit.ts). */
export type MCircuit =
  | { kind: "closed"; failures: number }
  | { kind: "open"; untilMs: number; coolDownMs: number }
  | { kind: "trial"; coolDownMs: number };

/** A lifecycle task as the observer sees it (issue 9). */
export type MTask = {
  id: string;
  createdAtMs: number;
  operation: LifecycleOperation;
  model: string | null;
  target: string | null;
  /** Connections it was sent to. */
  sent: Set<string>;
  /** Part status per connection, as last reported by lifecycleTaskChanged. */
  parts: Map<string, LifecycleStatus>;
  ended: boolean;
};

/** Scheduling measurements the named scenarios assert on (spec 004). */
export type SchedStats = {
  /** Dispatches from the queue or on arrival, per class (requeued ones again). */
  dispatched: Record<Priority, number>;
  /** Per tenant: the most dispatches of others any of its requests waited through. */
  maxWaitByTenant: Map<string, number>;
  /** The longest run of higher-class dispatches while low stayed dispatchable. */
  maxLowWait: number;
  /** Low dispatches made while a high request was dispatchable too (low not starved). */
  lowWhileHighWaits: number;
  /** The most other tenants served ahead of a waiting tenant of the same class. */
  maxOthersAhead: number;
  /** Admissions (counted in a window) and 429 refusals. */
  admitted: number;
  rateLimited: number;
  /** Dispatches that went to the key's remembered worker. */
  affinityHits: number;
  /** Issue 25: dispatches of a request some registered worker of its model could not take. */
  restrictedDispatches: number;
  /** Issue 25: refusals because no worker of the model takes the path (404) or the body (501). */
  pathRefusals: number;
};

/** Lifecycle statistics the scenario tests assert on (issue 9). */
export type LifecycleStats = {
  tasks: number;
  sent: number;
  completed: number;
  failed: number;
  refused: number;
  timedOut: number;
  workerLeft: number;
};

export type MReq = {
  id: string;
  model: string;
  tenant: string;
  priority: Priority;
  cacheKey: string | null;
  /** Queue dispatches of other requests since it was (re)queued, summed. */
  waited: number;
  streaming: boolean;
  arrivedAtMs: number;
  order: number;
  requeues: number;
  status: "queued" | "dispatched" | "streaming";
  queuedAtMs: number;
  /** First time it waited in the queue (C22: requeues keep it), null if never. */
  firstQueuedAtMs: number | null;
  /** The worker whose scoped error sent it back (issue 14.3). */
  avoid: string | null;
  /** An answer of it outgrew the frame limit (issue 14.2). */
  tooLarge: boolean;
  conn: string | null;
  lastChunkAtMs: number;
  nextSeq: number;
  chunkConn: string | null;
  /** Issue 25: the path it calls, and whether its body is not text. */
  path: string;
  binary: boolean;
  /** The stream's bytes so far end inside an SSE event (C60). */
  midEvent: boolean;
  /** stream-head-v1 (C108): the head its worker sent in this dispatch. */
  head?: StreamHead;
};

export type MWorker = {
  conn: string;
  registered: boolean;
  acked: Set<string>;
  wildcard: boolean;
  max: number;
  reportedLoad: number;
  assigned: Set<string>;
  cancelling: Map<string, number>;
  draining: boolean;
  /** Drains itself (drain-v1): its models stay known until it disconnects. */
  selfDraining: boolean;
  circuit: MCircuit;
  lastDispatch: number;
  /** Load level the worker is routable at (null: not routable) and when it got there. */
  level: number | null;
  levelSeq: number;
  advertised: { models: string[]; max: number; load: number } | null;
  /** register.extensions as sent (null: no field), undefined before register. */
  listed: string[] | null | undefined;
  /** Extensions both sides speak, once acked. */
  ext: Set<string>;
  /** Models it reported loaded or loading (capabilities-v1, when accepted). */
  reported: Set<string>;
  /** register.endpoint_prefixes as sent, trimmed (issue 25); empty = every path. */
  prefixes: string[];
};

/** How a request ended in this step. */
export type Ended = {
  tenant: string;
  conn: string | null;
  cancelled: boolean;
  how: Effect["kind"];
  code: string;
  /** It streamed, and how many pieces its client got (streamsCounted). */
  streaming: boolean;
  chunks: number;
};

/** A worker's final report of a task part, seen before the step (checked after it). */
export type FinalReport = {
  task: MTask;
  conn: string;
  status: LifecycleStatus;
};

export type LifecycleRequested = Extract<Event, { kind: "lifecycleRequested" }>;

/** The core's register sanitizing: trimmed, non-empty, short, unique, capped. */
export function sanitize(
  models: readonly string[],
  c: ObserverConfig,
): string[] {
  const out: string[] = [];
  for (const raw of models) {
    const m = raw.trim();
    if (m.length === 0 || m.length > c.modelNameCharsMax || out.includes(m)) {
      continue;
    }
    out.push(m);
  }
  return out.slice(0, c.modelsPerWorkerMax);
}

export function clampMax(n: number, c: ObserverConfig): number {
  return n < 1 ? 1 : n > c.maxConcurrentMax ? c.maxConcurrentMax : n;
}

/** The event is an oversized `response_complete` for `id` from `conn`: its worker is done with it. */
export function oversizedComplete(e: Event, conn: string, id: string): boolean {
  if (e.kind !== "workerFrameInvalid" || e.workerId !== conn) return false;
  const o = e.error.oversized;
  return o !== undefined && o.type === "response_complete" &&
    o.requestId === id;
}

export function newWorker(conn: string): MWorker {
  return {
    conn,
    registered: false,
    acked: new Set(),
    wildcard: false,
    max: 1,
    reportedLoad: 0,
    assigned: new Set(),
    cancelling: new Map(),
    draining: false,
    selfDraining: false,
    circuit: { kind: "closed", failures: 0 },
    lastDispatch: 0,
    level: null,
    levelSeq: 0,
    advertised: null,
    listed: undefined,
    ext: new Set(),
    prefixes: [],
    reported: new Set(),
  };
}

export class Model {
  readonly c: ObserverConfig;
  readonly tickMs: number;
  readonly reqs = new Map<string, MReq>();
  readonly ended = new Set<string>();
  readonly workers = new Map<string, MWorker>();
  queued = 0;
  order = 0;
  dispatches = 0;
  levelSeq = 0;
  stepLevelSeq = 0;
  shutdownDeadline: number | null = null;
  // -- spec 004 scheduling model ------------------------------------------------
  /** class|tenant -> queued count (a lane exists exactly while it is positive). */
  readonly lanes = new Map<string, number>();
  /** class|tenant -> other tenants of the class served while it had a dispatchable request. */
  readonly servedAhead = new Map<string, Set<string>>();
  /** higher class -> lower class -> its dispatches since the higher one was last served. */
  readonly lowerRuns = new Map<Priority, Map<Priority, number>>();
  lowRun = 0;
  /** tenant -> admission times still inside its window. */
  readonly windows = new Map<string, number[]>();
  /** Issue 26: tenant -> tokens of its finished requests, [time, tokens]. */
  readonly tokenCharges = new Map<string, Array<[number, number]>>();
  /** model|cacheKey -> the connection that served it last. */
  readonly affinity = new Map<string, string>();
  readonly sched: SchedStats = {
    dispatched: { high: 0, normal: 0, low: 0 },
    maxWaitByTenant: new Map(),
    maxLowWait: 0,
    lowWhileHighWaits: 0,
    maxOthersAhead: 0,
    admitted: 0,
    rateLimited: 0,
    affinityHits: 0,
    restrictedDispatches: 0,
    pathRefusals: 0,
  };
  // -- lifecycle (issue 9) -------------------------------------------------------
  readonly tasks = new Map<string, MTask>();
  openTasks = 0;
  readonly lifecycle: LifecycleStats = {
    tasks: 0,
    sent: 0,
    completed: 0,
    failed: 0,
    refused: 0,
    timedOut: 0,
    workerLeft: 0,
  };

  // -- per step ---------------------------------------------------------------
  event: Event | null = null;
  now = 0;
  newReq: MReq | null = null;
  queuedBefore = 0;
  readonly endedNow = new Map<string, Ended>();
  readonly finishedNow = new Set<string>();
  /** Streams counted at requestFinished this step, checked after it (streamsCounted). */
  readonly streamsCountedNow: Array<
    { id: string; tenant: string; tokens: number }
  > = [];
  readonly cancelsNow = new Set<string>();
  dropped = false;
  readonly droppedConns = new Set<string>();
  readonly tasksChangedNow = new Set<string>();
  finalReport: FinalReport | null = null;

  constructor(c: ObserverConfig, tickMs: number) {
    this.c = c;
    this.tickMs = tickMs;
  }

  /** Forgets the previous step's notes before `e` is reduced. */
  startStep(e: Event): void {
    this.event = e;
    this.now = e.atMs;
    this.newReq = null;
    this.endedNow.clear();
    this.finishedNow.clear();
    this.streamsCountedNow.length = 0;
    this.cancelsNow.clear();
    this.dropped = false;
    if (this.droppedConns.size > 0) this.droppedConns.clear();
    if (this.tasksChangedNow.size > 0) this.tasksChangedNow.clear();
    this.finalReport = null;
    this.stepLevelSeq = this.levelSeq;
  }

  backendAnswered(w: MWorker): void {
    if (w.circuit.kind === "closed" && w.circuit.failures === 0) return;
    w.circuit = { kind: "closed", failures: 0 };
    this.sync(w);
  }

  backendFailed(w: MWorker): void {
    const c = w.circuit;
    let coolDownMs = this.c.backendCoolDownMs;
    if (c.kind === "open") return;
    if (c.kind === "closed") {
      if (c.failures + 1 < this.c.backendFailuresMax) {
        w.circuit = { kind: "closed", failures: c.failures + 1 };
        return;
      }
    } else {
      coolDownMs = Math.min(c.coolDownMs * 2, this.c.backendCoolDownMaxMs);
    }
    w.circuit = { kind: "open", untilMs: this.now + coolDownMs, coolDownMs };
    this.sync(w);
  }

  /** Whether the backend circuit lets a request through now. */
  circuitLets(w: MWorker): boolean {
    return w.circuit.kind === "closed" ||
      (w.circuit.kind === "trial" && w.assigned.size === 0);
  }

  /**
   * Issue 25: whether `w` takes `q`'s path (a prefix of it listed, or none)
   * and can carry its body (text, or body-bytes-v1 negotiated).
   */
  accepts(w: MWorker, q: MReq): boolean {
    const pathOk = w.prefixes.length === 0 ||
      w.prefixes.some((p) => q.path.startsWith(p));
    return pathOk && (!q.binary || w.ext.has(EXTENSION_BODY_BYTES));
  }

  /** Whether a worker other than `avoid` could serve `q` soon (the core's otherWorkerServes). */
  otherServes(q: MReq, avoid: string): boolean {
    for (const x of this.workers.values()) {
      if (x.conn === avoid || !x.registered || x.draining) continue;
      if (x.circuit.kind === "open" || !this.accepts(x, q)) continue;
      if (x.acked.has(q.model) || x.wildcard) return true;
    }
    return false;
  }

  /** Whether `q` may go to `w`: `w` accepts it, and a refused request avoids its worker while another serves it. */
  mayGo(q: MReq, w: MWorker): boolean {
    return this.accepts(w, q) &&
      (q.avoid !== w.conn || !this.otherServes(q, w.conn));
  }

  /** A finished request lowers the reported load by one (core's documented choice). */
  lowerLoad(w: MWorker): void {
    if (w.reportedLoad > 0) w.reportedLoad--;
    this.sync(w);
  }

  /** Files the worker at its load level; a change of level sends it to the back (round-robin). */
  sync(w: MWorker): void {
    const load = this.load(w, true);
    const level =
      w.registered && !w.draining && this.workers.get(w.conn) === w &&
        load < w.max && this.circuitLets(w)
        ? load
        : null;
    if (level !== w.level) {
      w.level = level;
      w.levelSeq = ++this.levelSeq;
    }
  }

  requeue(r: MReq, w: MWorker | undefined, avoid: string | null = null): void {
    if (w !== undefined) {
      w.assigned.delete(r.id);
      this.lowerLoad(w);
    }
    r.status = "queued";
    r.queuedAtMs = this.now;
    r.firstQueuedAtMs ??= this.now;
    r.avoid = avoid;
    r.requeues++;
    r.conn = null;
    this.enqueued(r);
  }

  laneKey(r: MReq): string {
    return `${r.priority}|${r.tenant}`;
  }

  enqueued(r: MReq): void {
    this.queued++;
    const k = this.laneKey(r);
    this.lanes.set(k, (this.lanes.get(k) ?? 0) + 1);
  }

  dequeued(r: MReq): void {
    this.queued--;
    const k = this.laneKey(r);
    const n = (this.lanes.get(k) ?? 0) - 1;
    if (n > 0) this.lanes.set(k, n);
    else {
      // The lane is gone: a new one starts at the back of the rotation.
      this.lanes.delete(k);
      this.servedAhead.delete(k);
    }
    const w = this.sched.maxWaitByTenant.get(r.tenant) ?? 0;
    if (r.waited > w) this.sched.maxWaitByTenant.set(r.tenant, r.waited);
  }

  dropConn(conn: string): void {
    const w = this.workers.get(conn);
    if (w === undefined) return;
    this.workers.delete(conn);
    this.dropped = true;
    this.droppedConns.add(conn);
    for (const id of w.assigned) {
      const r = this.reqs.get(id);
      if (r !== undefined && r.status === "dispatched") {
        this.requeue(r, undefined);
      }
      // A streaming one must end in this very step (C24), checked after the step.
    }
  }

  /** The request ended in this step (answered, or its client gone). */
  end(r: MReq, how: Effect["kind"], code: string): void {
    const e = this.event;
    const conn = r.conn;
    this.reqs.delete(r.id);
    this.ended.add(r.id);
    if (r.status === "queued") this.dequeued(r);
    let cancelled = false;
    if (conn !== null) {
      const w = this.workers.get(conn);
      cancelled = this.cancelsNow.has(r.id);
      if (w !== undefined) {
        w.assigned.delete(r.id);
        const byItsWorker = ((e?.kind === "completeReceived" ||
          e?.kind === "workerErrorReceived") &&
          e.workerId === conn && e.requestId === r.id) ||
          (e !== null && oversizedComplete(e, conn, r.id));
        if (byItsWorker) this.lowerLoad(w);
      }
    }
    this.endedNow.set(r.id, {
      tenant: r.tenant,
      conn,
      cancelled,
      how,
      code,
      streaming: r.streaming,
      chunks: r.nextSeq,
    });
  }

  /**
   * Slots the worker holds: its requests plus cancels in grace; `hi` counts a
   * grace that ends at this tick too (the core may or may not have freed it yet,
   * by the order of the tick's worker loop). The reported load wins when higher.
   */
  load(w: MWorker, hi: boolean): number {
    let reserved = w.assigned.size;
    for (const graceEnd of w.cancelling.values()) {
      if (hi || this.now < graceEnd || this.event?.kind !== "tick") {
        reserved++;
      }
    }
    return reserved > w.reportedLoad ? reserved : w.reportedLoad;
  }

  /** Whether some worker that accepts `q` is certainly free for its model right now (C7, C42 with `*`). */
  certainlyFree(q: MReq): boolean {
    for (const x of this.workers.values()) {
      if (!x.registered || x.draining || !this.circuitLets(x)) continue;
      if (!x.acked.has(q.model) && !x.wildcard) continue;
      if (!this.accepts(x, q)) continue;
      if (this.load(x, true) < x.max) return true;
    }
    return false;
  }

  /** `certainlyFree` for a request that avoids the worker that refused it. */
  freeFor(q: MReq): boolean {
    for (const x of this.workers.values()) {
      if (!x.registered || x.draining || !this.circuitLets(x)) continue;
      if (!x.acked.has(q.model) && !x.wildcard) continue;
      if (this.load(x, true) < x.max && this.mayGo(q, x)) return true;
    }
    return false;
  }

  /**
   * Spec 004's view at a dispatch of `r` from the queue (deliberately simple:
   * which classes and tenants have a request some certainly-free worker could
   * take right now); every other waiting request waited one more dispatch.
   */
  readiness(r: MReq): Readiness {
    const byModel = new Map<string, boolean>();
    const free = (q: MReq): boolean => {
      const key = `${q.model}\u0000${q.path}\u0000${q.binary}`;
      let f = byModel.get(key);
      if (f === undefined) {
        f = this.certainlyFree(q);
        byModel.set(key, f);
      }
      return f;
    };
    const classReady = new Set<Priority>();
    const tenantsReady = new Map<string, string>();
    for (const q of this.reqs.values()) {
      if (q.status !== "queued" || q === r) continue;
      q.waited++;
      if (!(q.avoid === null ? free(q) : this.freeFor(q))) continue;
      classReady.add(q.priority);
      if (q.priority === r.priority && !tenantsReady.has(q.tenant)) {
        tenantsReady.set(q.tenant, q.id);
      }
    }
    return { classReady, tenantsReady };
  }

  /** The core's `workerHasModel`, on the observer's view. */
  holds(w: MWorker, model: string): boolean {
    return w.acked.has(model) || w.reported.has(model);
  }

  capable(w: MWorker): boolean {
    return w.registered && !w.draining && w.ext.has(EXTENSION_LIFECYCLE);
  }

  scope(e: LifecycleRequested): string {
    const s = e.params.scope;
    return typeof s === "string" ? s : e.modelId === null ? "all" : "model";
  }

  /** Whether a worker that could carry the operation exists (the task must not be refused then). */
  carrierExists(e: LifecycleRequested): boolean {
    if (this.shutdownDeadline !== null) return false;
    if (e.workerId !== null) {
      const w = this.workers.get(e.workerId);
      return w !== undefined && this.capable(w);
    }
    const modelScoped = e.operation === "model-unload" ||
      (e.operation === "cache-flush" && this.scope(e) === "model");
    for (const w of this.workers.values()) {
      if (!this.capable(w)) continue;
      if (!modelScoped || this.holds(w, e.modelId ?? "")) return true;
    }
    return false;
  }

  /** When the request must have ended by: its queue, request or idle timeout, or the shutdown's. */
  deadline(r: MReq): number {
    const arrival = r.arrivedAtMs + this.c.requestTimeoutMs;
    let d = r.status === "queued"
      ? Math.min(
        (r.firstQueuedAtMs ?? r.queuedAtMs) + this.c.queueTimeoutMs,
        arrival,
      )
      : r.status === "dispatched"
      ? arrival
      : r.lastChunkAtMs + this.c.requestTimeoutMs;
    if (this.shutdownDeadline !== null && this.shutdownDeadline < d) {
      d = this.shutdownDeadline;
    }
    return d;
  }
}
