// The observer: a deliberately simpler model of the relay (per request: open or
// ended, queued or on which worker, chunks seen; per worker: acked models, slots,
// draining) fed with every event and every effect, and the named invariants
// checked against it after every step (conventions §6). Each violation carries
// its name and checklist numbers.
import {
  type Effect,
  type Event,
  EXTENSION_CAPABILITIES,
  EXTENSION_LIFECYCLE,
  type LifecycleOperation,
  type LifecycleStatus,
  type LifecycleTaskView,
  type Priority,
  queueDepth,
  type RateLimit,
  SERVER_MESSAGE_TYPES,
  type State,
  SUPPORTED_EXTENSIONS,
} from "../core/mod.ts";

export const INVARIANTS = {
  endsExactlyOnce: "C34 every accepted request ends exactly once",
  deadline:
    "C12/C19/C48 a request ends no later than its deadline plus one tick",
  maxConcurrent: "C8 no worker has more in flight than max_concurrent",
  eligibleWorker:
    "C6/C7/C28/C42 dispatch only to a worker that acked the model and is not draining",
  queueBound: "C9 a new request is queued only below MAX_QUEUE_LEN",
  requeueCap: "C22/C23 at most 3 requeues, deadline never extended",
  chunkOrder: "C15 chunks reach the client in the order the worker sent them",
  chunkFromAssigned:
    "C32 chunks come only from the worker the request is assigned to",
  nothingAfterEnd: "C20 nothing reaches a client after its request ended",
  noSplice: "C24 a stream is never spliced from two workers",
  cancelWhenAbandoned:
    "C18/C19 a cancel goes to a worker exactly when a dispatched request is abandoned",
  fifo:
    "C9/C10 FIFO within (priority, tenant) among requests a free worker can serve",
  lowestLoad: "C8 lowest load wins, ties round-robin",
  observerAgrees: "C34 core and observer agree on open and queued requests",
  priorityOrder:
    "004 while a higher class stays dispatchable, a lower class gets at most ceil(w_lower/w_higher) dispatches between two of its dispatches (stride weights)",
  fairnessBound:
    "004 while a tenant has a dispatchable request waiting in a class, no other tenant of that class is served twice before it (at most one dispatch per other tenant)",
  noStarvation:
    "004 while low stays dispatchable, at most sum over higher classes of (floor(w/w_low)+1) dispatches pass before a low one",
  rateLimit:
    "004 per tenant, admissions in any sliding window never exceed the limit; 429 only when the window is full (never under- or over-counted)",
  cacheAffinity:
    "004 a cache key goes to the worker that served it last unless that worker is busier than the least-loaded one by more than the margin",
  extensionFramesOnlyToNegotiated:
    "I9 extension frames (lifecycle_request) go only to workers that listed the extension; register_ack carries extensions only for workers that sent the field; unnegotiated capabilities are ignored",
  lifecycleTaskEndsOnce:
    "I9 every lifecycle task ends (completed or failed) exactly once: on its worker's final report, when its worker leaves, or by lifecycleTaskTimeoutMs plus one tick",
  lifecycleOnlyToCapable:
    "I9 lifecycle operations go only to registered, non-draining workers that negotiated lifecycle-v1 (the named target if any; holders of the model for unload and model flush), and are refused only when no such worker exists",
  streamCarriesOnlyBackendBytes:
    "C15/C24 issue 14.4 a stream carries only its backend's bytes: a failure after the first byte (a status >= 400 completion) ends it with an SSE error event, never a spliced body or a normal end",
  retryElsewhere:
    "C27 issue 14.3 a request refused by a worker (scoped error) goes back to that worker only when no other worker serves the model; a worker whose backend circuit is open gets nothing",
  neverRunTwiceForSize:
    "issue 14.2 a request never runs twice because of its own answer's size",
  drainingModelsStayRoutable:
    "C28 issue 14.1 a worker draining itself (drain-v1) keeps its models known: requests for them queue, never 404, until it disconnects",
  liveness:
    "C34 heal phase: every request and lifecycle task ends within bounded steps",
} as const;
export type InvariantName = keyof typeof INVARIANTS;

export type Violation = {
  name: InvariantName;
  contract: string;
  message: string;
};

export type ObserverConfig = {
  queueLenMax: number;
  queueTimeoutMs: number;
  requestTimeoutMs: number;
  requeueCountMax: number;
  cancelGraceMs: number;
  drainTimeoutMs: number;
  maxConcurrentMax: number;
  modelsPerWorkerMax: number;
  modelNameCharsMax: number;
  tenantQueueLenMax: number;
  priorityWeights: Record<Priority, number>;
  rateLimits: Record<string, RateLimit>;
  defaultRateLimit: RateLimit | null;
  affinityLoadMargin: number;
  lifecycleTaskTimeoutMs: number;
  backendFailuresMax: number;
  backendCoolDownMs: number;
  backendCoolDownMaxMs: number;
};

/** The observer's copy of a worker's backend circuit (core/state/backend_circuit.ts). */
type MCircuit =
  | { kind: "closed"; failures: number }
  | { kind: "open"; untilMs: number; coolDownMs: number }
  | { kind: "trial"; coolDownMs: number };

/** Server -> worker frames that belong to an extension, and which one. */
const EXTENSION_FRAMES: Record<string, string> = {
  lifecycle_request: EXTENSION_LIFECYCLE,
};
/** Every other server frame is base protocol: any worker may get it. */
const BASE_FRAMES: ReadonlySet<string> = new Set(
  SERVER_MESSAGE_TYPES.filter((t) => EXTENSION_FRAMES[t] === undefined),
);

/** A lifecycle task as the observer sees it (issue 9). */
type MTask = {
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
};

const CLASSES: readonly Priority[] = ["high", "normal", "low"];
const RANK: Record<Priority, number> = { high: 0, normal: 1, low: 2 };
/** Refusals the core decides before the rate limit is consulted (not counted). */
const BEFORE_RATE = new Set([
  "shutting_down",
  "provider_disabled",
  "model_not_found",
]);

type MReq = {
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
};

type MWorker = {
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
};

type Ended = {
  tenant: string;
  conn: string | null;
  cancelled: boolean;
  how: Effect["kind"];
  code: string;
};

function sanitize(models: readonly string[], c: ObserverConfig): string[] {
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

function clampMax(n: number, c: ObserverConfig): number {
  return n < 1 ? 1 : n > c.maxConcurrentMax ? c.maxConcurrentMax : n;
}

/** Parses `conn|request|i;` pieces (see virtual_worker.ts `chunkText`). */
function pieces(text: string): { conn: string; rid: string; tag: string }[] {
  const out: { conn: string; rid: string; tag: string }[] = [];
  for (const p of text.split(";")) {
    if (p.length === 0) continue;
    const [conn = "", rid = "", tag = ""] = p.split("|");
    out.push({ conn, rid, tag });
  }
  return out;
}

/** The event is an oversized `response_complete` for `id` from `conn`: its worker is done with it. */
function oversizedComplete(e: Event, conn: string, id: string): boolean {
  if (e.kind !== "workerFrameInvalid" || e.workerId !== conn) return false;
  const o = e.error.oversized;
  return o !== undefined && o.type === "response_complete" &&
    o.requestId === id;
}

export class Observer {
  readonly #c: ObserverConfig;
  readonly #tickMs: number;
  readonly #reqs = new Map<string, MReq>();
  readonly #ended = new Set<string>();
  readonly #workers = new Map<string, MWorker>();
  #queued = 0;
  #order = 0;
  #dispatches = 0;
  #levelSeq = 0;
  #stepLevelSeq = 0;
  #shutdownDeadline: number | null = null;
  // -- spec 004 scheduling model ------------------------------------------------
  /** class|tenant -> queued count (a lane exists exactly while it is positive). */
  readonly #lanes = new Map<string, number>();
  /** class|tenant -> other tenants of the class served while it had a dispatchable request. */
  readonly #servedAhead = new Map<string, Set<string>>();
  /** higher class -> lower class -> its dispatches since the higher one was last served. */
  readonly #lowerRuns = new Map<Priority, Map<Priority, number>>();
  #lowRun = 0;
  /** tenant -> admission times still inside its window. */
  readonly #windows = new Map<string, number[]>();
  /** model|cacheKey -> the connection that served it last. */
  readonly #affinity = new Map<string, string>();
  readonly sched: SchedStats = {
    dispatched: { high: 0, normal: 0, low: 0 },
    maxWaitByTenant: new Map(),
    maxLowWait: 0,
    lowWhileHighWaits: 0,
    maxOthersAhead: 0,
    admitted: 0,
    rateLimited: 0,
    affinityHits: 0,
  };
  // -- lifecycle (issue 9) -------------------------------------------------------
  readonly #tasks = new Map<string, MTask>();
  #openTasks = 0;
  /** Lifecycle statistics the scenario tests assert on. */
  readonly lifecycle = {
    tasks: 0,
    sent: 0,
    completed: 0,
    failed: 0,
    refused: 0,
    timedOut: 0,
    workerLeft: 0,
  };
  checks = 0;
  violation: Violation | null = null;

  // -- per step ---------------------------------------------------------------
  #event: Event | null = null;
  #now = 0;
  #newReq: MReq | null = null;
  #queuedBefore = 0;
  #endedNow = new Map<string, Ended>();
  #finishedNow = new Set<string>();
  #cancelsNow = new Set<string>();
  #dropped = false;
  #droppedConns = new Set<string>();
  #tasksChangedNow = new Set<string>();
  #finalReport: { task: MTask; conn: string; status: LifecycleStatus } | null =
    null;

  constructor(c: ObserverConfig, tickMs: number) {
    this.#c = c;
    this.#tickMs = tickMs;
  }

  get openCount(): number {
    return this.#reqs.size;
  }

  /** Lifecycle tasks not yet completed or failed. */
  get openTasks(): number {
    return this.#openTasks;
  }

  #fail(name: InvariantName, message: string): void {
    if (this.violation === null) {
      this.violation = { name, contract: INVARIANTS[name], message };
    }
  }

  #check(ok: boolean, name: InvariantName, message: () => string): void {
    this.checks++;
    if (!ok) this.#fail(name, message());
  }

  failLiveness(message: string): void {
    this.#fail("liveness", message);
  }

  // -- before the reducer runs ------------------------------------------------

  beforeStep(e: Event): void {
    this.#event = e;
    this.#now = e.atMs;
    this.#newReq = null;
    this.#endedNow.clear();
    this.#finishedNow.clear();
    this.#cancelsNow.clear();
    this.#dropped = false;
    if (this.#droppedConns.size > 0) this.#droppedConns.clear();
    if (this.#tasksChangedNow.size > 0) this.#tasksChangedNow.clear();
    this.#finalReport = null;
    this.#stepLevelSeq = this.#levelSeq;
    switch (e.kind) {
      case "lifecycleRequested": {
        this.#check(
          !this.#tasks.has(e.taskId),
          "lifecycleTaskEndsOnce",
          () => `lifecycle task id "${e.taskId}" reused`,
        );
        this.#tasks.set(e.taskId, {
          id: e.taskId,
          createdAtMs: e.atMs,
          operation: e.operation,
          model: e.modelId,
          target: e.workerId,
          sent: new Set(),
          parts: new Map(),
          ended: false,
        });
        this.#openTasks++;
        this.lifecycle.tasks++;
        return;
      }
      case "lifecycleProgressReceived": {
        const t = this.#tasks.get(e.taskId);
        if (
          e.status !== "running" && t !== undefined && !t.ended &&
          t.sent.has(e.workerId) && t.parts.get(e.workerId) === "running" &&
          this.#workers.get(e.workerId)?.registered === true
        ) this.#finalReport = { task: t, conn: e.workerId, status: e.status };
        return;
      }
      case "requestReceived":
        this.#check(
          !this.#reqs.has(e.requestId) && !this.#ended.has(e.requestId),
          "endsExactlyOnce",
          () => `request id "${e.requestId}" reused`,
        );
        this.#queuedBefore = this.#queued;
        this.#newReq = {
          id: e.requestId,
          model: e.model,
          tenant: e.tenant ?? "default",
          priority: e.priority ?? "normal",
          cacheKey: e.cacheKey ?? null,
          waited: 0,
          streaming: e.isStreaming,
          arrivedAtMs: e.atMs,
          order: ++this.#order,
          requeues: 0,
          status: "queued",
          queuedAtMs: e.atMs,
          firstQueuedAtMs: e.atMs,
          avoid: null,
          tooLarge: false,
          conn: null,
          lastChunkAtMs: 0,
          nextSeq: 0,
          chunkConn: null,
        };
        return;
      case "registerReceived": {
        const w = this.#workers.get(e.workerId);
        if (w !== undefined && !w.registered) {
          w.advertised = {
            models: e.models,
            max: e.maxConcurrent,
            load: e.currentLoad,
          };
          w.listed = e.extensions ?? null;
        }
        return;
      }
      case "pongReceived": {
        const w = this.#workers.get(e.workerId);
        if (w?.registered && e.currentLoad !== null) {
          w.reportedLoad = e.currentLoad;
          this.#sync(w);
        }
        return;
      }
      case "modelsUpdateReceived": {
        const w = this.#workers.get(e.workerId);
        if (w?.registered !== true) return;
        const models = sanitize(e.models, this.#c);
        w.acked = new Set(models.filter((m) => m !== "*"));
        w.wildcard = models.includes("*");
        if (e.currentLoad !== null) w.reportedLoad = e.currentLoad;
        if (e.draining === true && !w.draining) {
          w.draining = true;
          w.selfDraining = true;
        }
        w.level = null; // re-filed under its new models: back of its level
        this.#sync(w);
        return;
      }
      case "chunkReceived": {
        const w = this.#workers.get(e.workerId);
        const r = this.#reqs.get(e.requestId);
        if (
          w?.registered === true && r !== undefined && r.conn === w.conn &&
          (!r.streaming || r.status === "dispatched")
        ) this.#backendAnswered(w);
        return;
      }
      case "workerFrameInvalid": {
        const o = e.error.oversized;
        if (o === undefined) return;
        const w = this.#workers.get(e.workerId);
        if (
          o.type === "response_complete" && w?.cancelling.delete(o.requestId)
        ) {
          this.#lowerLoad(w); // an oversized acknowledgment still frees the slot (C44)
          return;
        }
        const r = this.#reqs.get(o.requestId);
        if (r !== undefined && r.conn === e.workerId) r.tooLarge = true;
        return;
      }
      case "tick":
        for (const w of this.#workers.values()) {
          const c = w.circuit;
          if (c.kind === "open" && e.atMs >= c.untilMs) {
            w.circuit = { kind: "trial", coolDownMs: c.coolDownMs };
            this.#sync(w);
          }
        }
        return;
      case "completeReceived":
      case "workerErrorReceived": {
        const w = this.#workers.get(e.workerId);
        if (w?.registered !== true || e.requestId === null) return;
        if (w.cancelling.has(e.requestId)) {
          w.cancelling.delete(e.requestId); // C44 acknowledgment frees the slot
          this.#lowerLoad(w);
          return;
        }
        const r = this.#reqs.get(e.requestId);
        if (r === undefined || r.conn !== w.conn || r.status === "queued") {
          return;
        }
        if (e.kind === "completeReceived") return this.#backendAnswered(w);
        if (r.status === "dispatched") this.#requeue(r, w, w.conn);
        if (e.code === "backend_unavailable") this.#backendFailed(w);
        return;
      }
      case "workerDisconnected":
        this.#dropConn(e.workerId);
        return;
      case "shutdownRequested":
        if (this.#shutdownDeadline === null) {
          this.#shutdownDeadline = e.atMs + this.#c.drainTimeoutMs;
        }
        return;
      default:
        return;
    }
  }

  #backendAnswered(w: MWorker): void {
    if (w.circuit.kind === "closed" && w.circuit.failures === 0) return;
    w.circuit = { kind: "closed", failures: 0 };
    this.#sync(w);
  }

  #backendFailed(w: MWorker): void {
    const c = w.circuit;
    let coolDownMs = this.#c.backendCoolDownMs;
    if (c.kind === "open") return;
    if (c.kind === "closed") {
      if (c.failures + 1 < this.#c.backendFailuresMax) {
        w.circuit = { kind: "closed", failures: c.failures + 1 };
        return;
      }
    } else {
      coolDownMs = Math.min(c.coolDownMs * 2, this.#c.backendCoolDownMaxMs);
    }
    w.circuit = { kind: "open", untilMs: this.#now + coolDownMs, coolDownMs };
    this.#sync(w);
  }

  /** Whether the backend circuit lets a request through now. */
  #circuitLets(w: MWorker): boolean {
    return w.circuit.kind === "closed" ||
      (w.circuit.kind === "trial" && w.assigned.size === 0);
  }

  /** Whether a worker other than `avoid` could serve the model soon (the core's otherWorkerServes). */
  #otherServes(model: string, avoid: string): boolean {
    for (const x of this.#workers.values()) {
      if (x.conn === avoid || !x.registered || x.draining) continue;
      if (x.circuit.kind === "open") continue;
      if (x.acked.has(model) || x.wildcard) return true;
    }
    return false;
  }

  /** Whether `q` may go to `w` (a refused request avoids its worker while another serves it). */
  #mayGo(q: MReq, w: MWorker): boolean {
    return q.avoid !== w.conn || !this.#otherServes(q.model, w.conn);
  }

  /** A finished request lowers the reported load by one (core's documented choice). */
  #lowerLoad(w: MWorker): void {
    if (w.reportedLoad > 0) w.reportedLoad--;
    this.#sync(w);
  }

  /** Files the worker at its load level; a change of level sends it to the back (round-robin). */
  #sync(w: MWorker): void {
    const load = this.#load(w, true);
    const level =
      w.registered && !w.draining && this.#workers.get(w.conn) === w &&
        load < w.max && this.#circuitLets(w)
        ? load
        : null;
    if (level !== w.level) {
      w.level = level;
      w.levelSeq = ++this.#levelSeq;
    }
  }

  #requeue(r: MReq, w: MWorker | undefined, avoid: string | null = null): void {
    if (w !== undefined) {
      w.assigned.delete(r.id);
      this.#lowerLoad(w);
    }
    r.status = "queued";
    r.queuedAtMs = this.#now;
    r.firstQueuedAtMs ??= this.#now;
    r.avoid = avoid;
    r.requeues++;
    r.conn = null;
    this.#enqueued(r);
  }

  #laneKey(r: MReq): string {
    return `${r.priority}|${r.tenant}`;
  }

  #enqueued(r: MReq): void {
    this.#queued++;
    const k = this.#laneKey(r);
    this.#lanes.set(k, (this.#lanes.get(k) ?? 0) + 1);
  }

  #dequeued(r: MReq): void {
    this.#queued--;
    const k = this.#laneKey(r);
    const n = (this.#lanes.get(k) ?? 0) - 1;
    if (n > 0) this.#lanes.set(k, n);
    else {
      // The lane is gone: a new one starts at the back of the rotation.
      this.#lanes.delete(k);
      this.#servedAhead.delete(k);
    }
    const w = this.sched.maxWaitByTenant.get(r.tenant) ?? 0;
    if (r.waited > w) this.sched.maxWaitByTenant.set(r.tenant, r.waited);
  }

  #dropConn(conn: string): void {
    const w = this.#workers.get(conn);
    if (w === undefined) return;
    this.#workers.delete(conn);
    this.#dropped = true;
    this.#droppedConns.add(conn);
    for (const id of w.assigned) {
      const r = this.#reqs.get(id);
      if (r !== undefined && r.status === "dispatched") {
        this.#requeue(r, undefined);
      }
      // A streaming one must end in this very step (C24), checked after the step.
    }
  }

  // -- each effect, in order --------------------------------------------------

  effect(f: Effect): void {
    switch (f.kind) {
      case "acceptWorker":
        this.#workers.set(f.workerId, {
          conn: f.workerId,
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
          reported: new Set(),
        });
        return;
      case "lifecycleTaskChanged":
        return this.#taskChanged(f.task);
      case "closeWorker":
        this.#dropConn(f.workerId);
        return;
      case "sendToWorker":
        return this.#sendToWorker(f);
      case "startStream": {
        const r = this.#open(f.requestId, "startStream");
        if (r === null) return;
        const e = this.#event;
        this.#check(
          r.streaming && r.status === "dispatched" &&
            e?.kind === "chunkReceived" &&
            e.workerId === r.conn && e.requestId === r.id,
          "chunkFromAssigned",
          () =>
            `startStream for ${r.id} (status ${r.status}, worker ${r.conn}) on ${e?.kind}`,
        );
        r.status = "streaming";
        return;
      }
      case "writeChunk":
        return this.#writeChunk(f.requestId, f.chunk);
      case "respond": {
        const r = this.#open(f.requestId, "respond");
        if (r === null) return;
        const e = this.#event;
        // A streaming request answered before any chunk gets the whole response (C14).
        this.#check(
          r.status === "dispatched" && e?.kind === "completeReceived" &&
            e.workerId === r.conn &&
            e.requestId === r.id,
          "chunkFromAssigned",
          () =>
            `respond for ${r.id} (worker ${r.conn}) on ${e?.kind} from ${
              (e as { workerId?: string }).workerId
            }`,
        );
        // A JSON error body (a failing backend, a worker's 502/503) carries no pieces.
        const ps = f.status >= 400 && f.body.startsWith("{")
          ? []
          : pieces(f.body);
        ps.forEach((p, i) => {
          this.#check(
            p.conn === r.conn && p.rid === r.id,
            "noSplice",
            () =>
              `response body of ${r.id} has a piece from ${p.conn}/${p.rid}, assigned ${r.conn}`,
          );
          this.#check(
            p.tag === (i === ps.length - 1 && !r.streaming ? "B" : String(i)),
            "chunkOrder",
            () =>
              `response body of ${r.id} out of order: ${
                JSON.stringify(f.body)
              }`,
          );
        });
        return this.#end(r, f.kind, "");
      }
      case "respondError": {
        const nr = this.#newReq;
        if (
          nr !== null && nr.id === f.requestId &&
          f.error.code === "model_not_found"
        ) {
          const holder = [...this.#workers.values()].find((x) =>
            x.registered && (x.acked.has(nr.model) || x.wildcard)
          );
          this.#check(
            holder === undefined,
            "drainingModelsStayRoutable",
            () =>
              `${nr.id} for "${nr.model}" answered 404 while ${holder?.conn}${
                holder?.selfDraining === true ? " (draining itself)" : ""
              } still holds the model`,
          );
        }
        if (nr !== null && nr.id === f.requestId && !this.#reqs.has(nr.id)) {
          this.#check(
            !this.#ended.has(nr.id),
            "endsExactlyOnce",
            () => `${nr.id} ended twice`,
          );
          this.#ended.add(nr.id);
          this.#endedNow.set(nr.id, {
            tenant: nr.tenant,
            conn: null,
            cancelled: false,
            how: f.kind,
            code: f.error.code,
          });
          return;
        }
        const r = this.#open(f.requestId, "respondError");
        if (r === null) return;
        this.#check(
          r.status !== "streaming",
          "endsExactlyOnce",
          () => `respondError for ${r.id} whose stream already started`,
        );
        return this.#end(r, f.kind, f.error.code);
      }
      case "endStream": {
        const r = this.#open(f.requestId, "endStream");
        if (r === null) return;
        this.#check(
          r.status === "streaming",
          "endsExactlyOnce",
          () => `endStream for ${r.id} in status ${r.status}`,
        );
        const e = this.#event;
        this.#check(
          f.error !== null ||
            !(e?.kind === "completeReceived" && e.statusCode >= 400),
          "streamCarriesOnlyBackendBytes",
          () =>
            `${r.id}: a status ${
              (e as { statusCode?: number }).statusCode
            } completion after the stream started ended it normally`,
        );
        return this.#end(r, f.kind, f.error?.code ?? "");
      }
      case "requestFinished": {
        const e = this.#event;
        if (
          e?.kind === "clientDisconnected" && e.requestId === f.requestId &&
          !this.#endedNow.has(f.requestId)
        ) {
          // The client is gone: nobody to answer, the request just ends (C18).
          const r = this.#open(f.requestId, "requestFinished");
          if (r !== null) this.#end(r, f.kind, "client_gone");
        }
        this.#check(
          this.#endedNow.has(f.requestId) &&
            !this.#finishedNow.has(f.requestId),
          "endsExactlyOnce",
          () =>
            `requestFinished for ${f.requestId} without exactly one client answer in the step`,
        );
        const endedAs = this.#endedNow.get(f.requestId);
        this.#check(
          endedAs === undefined || endedAs.tenant === f.tenant,
          "observerAgrees",
          () =>
            `requestFinished for ${f.requestId} names tenant "${f.tenant}", the request was "${endedAs?.tenant}"`,
        );
        this.#finishedNow.add(f.requestId);
        this.#check(
          f.requeues <= this.#c.requeueCountMax,
          "requeueCap",
          () => `${f.requestId} finished after ${f.requeues} requeues`,
        );
        this.#check(
          f.outcome !== "rejected" || this.#newReq?.id === f.requestId,
          "endsExactlyOnce",
          () => `${f.requestId} rejected after it was accepted`,
        );
        return;
      }
      default:
        return;
    }
  }

  #open(id: string, what: string): MReq | null {
    const r = this.#reqs.get(id);
    if (r !== undefined) return r;
    this.#check(
      false,
      this.#ended.has(id) ? "nothingAfterEnd" : "endsExactlyOnce",
      () =>
        `${what} for ${
          this.#ended.has(id) ? "ended" : "unknown"
        } request ${id}`,
    );
    return null;
  }

  #end(r: MReq, how: Effect["kind"], code: string): void {
    const e = this.#event;
    const conn = r.conn;
    this.#reqs.delete(r.id);
    this.#ended.add(r.id);
    if (r.status === "queued") this.#dequeued(r);
    let cancelled = false;
    if (conn !== null) {
      const w = this.#workers.get(conn);
      cancelled = this.#cancelsNow.has(r.id);
      if (w !== undefined) {
        w.assigned.delete(r.id);
        const byItsWorker = ((e?.kind === "completeReceived" ||
          e?.kind === "workerErrorReceived") &&
          e.workerId === conn && e.requestId === r.id) ||
          (e !== null && oversizedComplete(e, conn, r.id));
        if (byItsWorker) this.#lowerLoad(w);
      }
    }
    this.#endedNow.set(r.id, { tenant: r.tenant, conn, cancelled, how, code });
  }

  #writeChunk(id: string, chunk: string): void {
    const r = this.#open(id, "writeChunk");
    if (r === null) return;
    const e = this.#event;
    this.#check(
      !(e?.kind === "completeReceived" && e.statusCode >= 400),
      "streamCarriesOnlyBackendBytes",
      () =>
        `${id}: the body of a status ${
          (e as { statusCode?: number }).statusCode
        } completion was written into its stream`,
    );
    const fromEvent = (e?.kind === "chunkReceived" && e.chunk === chunk) ||
      (e?.kind === "completeReceived" && e.body === chunk);
    this.#check(
      r.streaming && r.status === "streaming" && fromEvent &&
        e.workerId === r.conn && e.requestId === r.id,
      "chunkFromAssigned",
      () =>
        `writeChunk for ${r.id} (assigned ${r.conn}, status ${r.status}) on ${e?.kind}`,
    );
    for (const p of pieces(chunk)) {
      this.#check(
        r.chunkConn === null || p.conn === r.chunkConn,
        "noSplice",
        () =>
          `${r.id} got a chunk from ${p.conn} after chunks from ${r.chunkConn}`,
      );
      r.chunkConn ??= p.conn;
      this.#check(
        p.conn === r.conn && p.rid === r.id,
        "chunkFromAssigned",
        () =>
          `${r.id} (assigned ${r.conn}) got chunk ${p.conn}|${p.rid}|${p.tag}`,
      );
      this.#check(
        p.tag === String(r.nextSeq),
        "chunkOrder",
        () => `${r.id} expected chunk ${r.nextSeq}, got ${p.tag}`,
      );
      r.nextSeq++;
    }
    r.lastChunkAtMs = this.#now;
  }

  #load(w: MWorker, hi: boolean): number {
    let reserved = w.assigned.size;
    for (const graceEnd of w.cancelling.values()) {
      // A grace that ends at this tick may or may not be freed yet (order of the tick's worker loop).
      if (hi || this.#now < graceEnd || this.#event?.kind !== "tick") {
        reserved++;
      }
    }
    return reserved > w.reportedLoad ? reserved : w.reportedLoad;
  }

  #sendToWorker(f: Extract<Effect, { kind: "sendToWorker" }>): void {
    const w = this.#workers.get(f.workerId);
    const m = f.message;
    switch (m.type) {
      case "register_ack": {
        if (w === undefined || w.advertised === null) {
          return this.#check(
            false,
            "eligibleWorker",
            () => `register_ack to unknown worker ${f.workerId}`,
          );
        }
        const adv = sanitize(w.advertised.models, this.#c);
        this.#check(
          m.models.every((x) => adv.includes(x)),
          "eligibleWorker",
          () => `${w.conn} acked ${m.models} beyond advertised ${adv}`,
        );
        const listed = w.listed ?? null;
        this.#check(
          (m.extensions != null) === (listed !== null),
          "extensionFramesOnlyToNegotiated",
          () =>
            `register_ack to ${w.conn} ${
              m.extensions == null ? "without" : "with"
            } extensions, but its register ${
              listed === null ? "had no extensions field" : `listed ${listed}`
            }`,
        );
        w.ext = new Set(
          SUPPORTED_EXTENSIONS.filter((x) => listed?.includes(x) === true),
        );
        w.registered = true;
        // The core keeps its workers in registration order and frees cancel graces at
        // a tick in that order, so the observer files them in the same order.
        this.#workers.delete(w.conn);
        this.#workers.set(w.conn, w);
        w.acked = new Set(m.models.filter((x) => x !== "*"));
        w.wildcard = m.models.includes("*");
        w.max = clampMax(w.advertised.max, this.#c);
        w.reportedLoad = w.advertised.load;
        this.#sync(w);
        return;
      }
      case "graceful_shutdown":
        if (w !== undefined) {
          w.draining = true;
          this.#sync(w);
        }
        return;
      case "cancel": {
        const r = this.#reqs.get(m.request_id);
        this.#check(
          r !== undefined && w !== undefined && r.conn === w.conn,
          "cancelWhenAbandoned",
          () =>
            `cancel to ${f.workerId} for ${m.request_id} (${
              r === undefined ? "not open" : `status ${r.status} on ${r.conn}`
            })`,
        );
        this.#cancelsNow.add(m.request_id);
        if (w !== undefined && r !== undefined && r.conn === w.conn) {
          w.assigned.delete(r.id);
          w.cancelling.set(r.id, this.#now + this.#c.cancelGraceMs);
          this.#sync(w);
        }
        return;
      }
      case "request":
        return this.#dispatch(f.workerId, w, m.request_id);
      default: {
        const needs = EXTENSION_FRAMES[m.type];
        this.#check(
          BASE_FRAMES.has(m.type) ||
            (needs !== undefined && w?.registered === true && w.ext.has(needs)),
          "extensionFramesOnlyToNegotiated",
          () =>
            `${m.type} sent to ${f.workerId}, which ${
              w === undefined
                ? "is not connected"
                : !w.registered
                ? "is not registered"
                : w.listed == null
                ? "sent no extensions field (original-style)"
                : `listed only ${w.listed}`
            }`,
        );
        if (m.type === "lifecycle_request") {
          this.#lifecycleSent(f.workerId, w, m.task_id, m.operation, m.params);
        }
        return;
      }
    }
  }

  // -- lifecycle (issue 9) ------------------------------------------------------

  /** The core's `workerHasModel`, on the observer's view. */
  #holds(w: MWorker, model: string): boolean {
    return w.acked.has(model) || w.reported.has(model);
  }

  #capable(w: MWorker): boolean {
    return w.registered && !w.draining && w.ext.has(EXTENSION_LIFECYCLE);
  }

  #lifecycleSent(
    conn: string,
    w: MWorker | undefined,
    taskId: string,
    operation: LifecycleOperation,
    params: Record<string, unknown>,
  ): void {
    const e = this.#event;
    const t = this.#tasks.get(taskId);
    this.#check(
      e?.kind === "lifecycleRequested" && e.taskId === taskId &&
        e.operation === operation && t !== undefined && !t.sent.has(conn),
      "lifecycleOnlyToCapable",
      () =>
        `lifecycle_request ${taskId} (${operation}) to ${conn} on ${e?.kind} (not its own lifecycleRequested, or sent twice)`,
    );
    if (t === undefined || e?.kind !== "lifecycleRequested") return;
    this.lifecycle.sent++;
    t.sent.add(conn);
    this.#check(
      w !== undefined && this.#capable(w),
      "lifecycleOnlyToCapable",
      () =>
        `${taskId} (${operation}) sent to ${conn}, which is ${
          w === undefined
            ? "not connected"
            : !w.registered
            ? "not registered"
            : w.draining
            ? "draining"
            : "not lifecycle-v1"
        }`,
    );
    this.#check(
      e.workerId === null || e.workerId === conn,
      "lifecycleOnlyToCapable",
      () => `${taskId} (${operation}) for ${e.workerId} went to ${conn}`,
    );
    this.#check(
      e.modelId === null || params.modelId === e.modelId,
      "lifecycleOnlyToCapable",
      () =>
        `${taskId} for model ${e.modelId} sent with params.modelId ${params.modelId}`,
    );
    const modelScoped = operation === "model-unload" ||
      (operation === "cache-flush" && this.#scope(e) === "model");
    if (modelScoped && e.workerId === null && w !== undefined) {
      this.#check(
        this.#holds(w, e.modelId ?? ""),
        "lifecycleOnlyToCapable",
        () =>
          `${taskId} (${operation} ${e.modelId}) sent to ${conn}, which does not hold the model`,
      );
    }
  }

  #scope(e: Extract<Event, { kind: "lifecycleRequested" }>): string {
    const s = e.params.scope;
    return typeof s === "string" ? s : e.modelId === null ? "all" : "model";
  }

  /** Whether a worker that could carry the operation exists (the task must not be refused then). */
  #carrierExists(e: Extract<Event, { kind: "lifecycleRequested" }>): boolean {
    if (this.#shutdownDeadline !== null) return false;
    if (e.workerId !== null) {
      const w = this.#workers.get(e.workerId);
      return w !== undefined && this.#capable(w);
    }
    const modelScoped = e.operation === "model-unload" ||
      (e.operation === "cache-flush" && this.#scope(e) === "model");
    for (const w of this.#workers.values()) {
      if (!this.#capable(w)) continue;
      if (!modelScoped || this.#holds(w, e.modelId ?? "")) return true;
    }
    return false;
  }

  #taskChanged(v: LifecycleTaskView): void {
    const t = this.#tasks.get(v.id);
    this.#check(
      t !== undefined && !t.ended,
      "lifecycleTaskEndsOnce",
      () =>
        `lifecycleTaskChanged for ${
          t === undefined ? "unknown" : "already ended"
        } task ${v.id} (${v.status})`,
    );
    if (t === undefined || t.ended) return;
    this.#tasksChangedNow.add(t.id);
    const e = this.#event!;
    this.#check(
      v.parts.length === t.sent.size &&
        v.parts.every((p) => t.sent.has(p.workerId)),
      "lifecycleOnlyToCapable",
      () =>
        `${t.id} has parts on ${
          v.parts.map((p) => p.workerId)
        } but was sent to ${[...t.sent]}`,
    );
    let running = 0;
    for (const p of v.parts) {
      const before = t.parts.get(p.workerId) ?? "running";
      if (p.status === "running") running++;
      if (before !== "running") {
        this.#check(
          p.status === before,
          "lifecycleTaskEndsOnce",
          () =>
            `${t.id} part on ${p.workerId} went from ${before} to ${p.status}`,
        );
      } else if (p.status === "completed") {
        this.#check(
          e.kind === "lifecycleProgressReceived" && e.taskId === t.id &&
            e.workerId === p.workerId && e.status === "completed",
          "lifecycleTaskEndsOnce",
          () =>
            `${t.id} part on ${p.workerId} completed on ${e.kind} without its worker's report`,
        );
      } else if (p.status === "failed") {
        const reported = e.kind === "lifecycleProgressReceived" &&
          e.taskId === t.id && e.workerId === p.workerId &&
          e.status === "failed";
        const left = this.#droppedConns.has(p.workerId);
        const timedOut = e.kind === "tick" &&
          e.atMs >= t.createdAtMs + this.#c.lifecycleTaskTimeoutMs;
        if (left) this.lifecycle.workerLeft++;
        if (timedOut && !reported && !left) this.lifecycle.timedOut++;
        this.#check(
          reported || left || timedOut,
          "lifecycleTaskEndsOnce",
          () =>
            `${t.id} part on ${p.workerId} failed on ${e.kind} at ${e.atMs} (created ${t.createdAtMs}) without a report, a disconnect or its timeout`,
        );
      }
      t.parts.set(p.workerId, p.status);
    }
    if (v.status === "running") {
      this.#check(
        running > 0,
        "lifecycleTaskEndsOnce",
        () => `${t.id} still running with no running part`,
      );
      return;
    }
    t.ended = true;
    this.#openTasks--;
    if (v.status === "completed") this.lifecycle.completed++;
    else this.lifecycle.failed++;
    this.#check(
      running === 0 && (v.status === "failed" || v.parts.length > 0) &&
        (v.status !== "completed" ||
          v.parts.every((p) => p.status === "completed")) &&
        (v.status !== "failed" || v.error !== null),
      "lifecycleTaskEndsOnce",
      () =>
        `${t.id} ended ${v.status} with parts ${
          v.parts.map((p) => `${p.workerId}:${p.status}`)
        } (error ${v.error?.code})`,
    );
    if (v.parts.length === 0 && e.kind === "lifecycleRequested") {
      this.lifecycle.refused++;
      this.#check(
        !this.#carrierExists(e),
        "lifecycleOnlyToCapable",
        () =>
          `${t.id} (${t.operation} ${t.model} target ${t.target}) refused ${v.error?.status} ${v.error?.code} while a capable worker is connected`,
      );
    }
  }

  /** After each step: lifecycle promises that span the whole step. */
  #afterLifecycle(e: Event, state: State): void {
    if (e.kind === "lifecycleRequested") {
      this.#check(
        this.#tasksChangedNow.has(e.taskId),
        "lifecycleTaskEndsOnce",
        () => `${e.taskId} requested without a lifecycleTaskChanged`,
      );
    }
    const fr = this.#finalReport;
    if (fr !== null) {
      this.#check(
        fr.task.parts.get(fr.conn) === fr.status,
        "lifecycleTaskEndsOnce",
        () =>
          `${fr.conn} reported ${fr.task.id} ${fr.status}, but its part is ${
            fr.task.parts.get(fr.conn)
          }`,
      );
    }
    if (e.kind === "capabilitiesReceived") {
      const w = this.#workers.get(e.workerId);
      if (w?.registered === true) {
        if (w.ext.has(EXTENSION_CAPABILITIES)) {
          const m = e.capabilities.models;
          w.reported = new Set([
            ...(m?.loaded ?? []).map((x) => x.id),
            ...(m?.loading ?? []).map((x) => x.id),
          ]);
        } else {
          this.#check(
            (state.workers.get(e.workerId)?.capabilities ?? null) === null,
            "extensionFramesOnlyToNegotiated",
            () =>
              `capabilities from ${e.workerId} kept although it listed ${w.listed}`,
          );
        }
      }
    }
    if (this.#openTasks === 0) return;
    const ticked = e.kind === "tick";
    if (!ticked && this.#droppedConns.size === 0) return;
    for (const t of this.#tasks.values()) {
      if (t.ended) continue;
      for (const conn of t.sent) {
        this.#check(
          !this.#droppedConns.has(conn) || t.parts.get(conn) !== "running",
          "lifecycleTaskEndsOnce",
          () => `${t.id} part on ${conn} still running after its worker left`,
        );
      }
      this.#check(
        !ticked || t.createdAtMs + this.#c.lifecycleTaskTimeoutMs > e.atMs,
        "lifecycleTaskEndsOnce",
        () =>
          `${t.id} (${t.operation}, created ${t.createdAtMs}) still running at tick ${e.atMs}, past its ${this.#c.lifecycleTaskTimeoutMs} ms timeout`,
      );
    }
  }

  #dispatch(conn: string, w: MWorker | undefined, id: string): void {
    const nr = this.#newReq;
    const isNew = nr !== null && nr.id === id && !this.#reqs.has(id) &&
      !this.#ended.has(id);
    const r = isNew ? nr : this.#reqs.get(id);
    this.#check(
      r !== undefined && r.status === "queued",
      "endsExactlyOnce",
      () =>
        `request ${id} dispatched while ${
          r === undefined ? "not open" : r.status
        }`,
    );
    if (r === undefined || r.status !== "queued") return;
    this.#check(
      w?.registered === true,
      "eligibleWorker",
      () => `${id} dispatched to unregistered ${conn}`,
    );
    if (w === undefined || !w.registered) return;
    this.#check(
      !w.draining,
      "eligibleWorker",
      () => `${id} dispatched to draining ${conn}`,
    );
    this.#check(
      this.#circuitLets(w),
      "retryElsewhere",
      () =>
        `${id} dispatched to ${conn} whose backend circuit is ${w.circuit.kind} (${w.assigned.size} in flight)`,
    );
    this.#check(
      this.#mayGo(r, w),
      "retryElsewhere",
      () =>
        `${id}, refused by ${conn}, went back to it while another worker serves "${r.model}"`,
    );
    this.#check(
      !r.tooLarge,
      "neverRunTwiceForSize",
      () => `${id} dispatched again after its answer outgrew the frame limit`,
    );
    const exact = w.acked.has(r.model);
    this.#check(
      exact || w.wildcard,
      "eligibleWorker",
      () =>
        `${id} for "${r.model}" dispatched to ${conn} which acked ${[
          ...w.acked,
        ]}`,
    );
    let reservedLo = w.assigned.size;
    for (const g of w.cancelling.values()) {
      if (this.#now < g || this.#event?.kind !== "tick") reservedLo++;
    }
    this.#check(
      reservedLo < w.max,
      "maxConcurrent",
      () =>
        `${id} dispatched to ${conn} holding ${reservedLo} of max_concurrent ${w.max}`,
    );
    this.#check(
      r.requeues <= this.#c.requeueCountMax,
      "requeueCap",
      () => `${id} dispatched after ${r.requeues} requeues`,
    );
    // Cache affinity (004): the key's remembered worker may win within the margin.
    const akey = r.cacheKey === null ? null : `${r.model}\u0000${r.cacheKey}`;
    const preferred = akey === null ? undefined : this.#affinity.get(akey);
    const viaAffinity = preferred === conn;
    if (viaAffinity) this.sched.affinityHits++;
    // Choice (C8, C42): nobody certainly better was free.
    const myLo = this.#load(w, false);
    let bestHi = Infinity;
    for (const x of this.#workers.values()) {
      if (x === w || !x.registered || x.draining) continue;
      if (!this.#circuitLets(x) || x.conn === r.avoid) continue;
      const xExact = x.acked.has(r.model);
      if (!xExact && !(x.wildcard && !exact)) continue;
      const xHi = this.#load(x, true);
      if (xHi >= x.max) continue;
      if (xHi < bestHi) bestHi = xHi;
      this.#check(
        exact || !xExact,
        "eligibleWorker",
        () =>
          `${id} for "${r.model}" went to wildcard ${conn} while ${x.conn} serves it exactly and is free`,
      );
      if (viaAffinity) continue;
      // Ties: the worker waiting longest at that level goes first (round-robin). Order
      // among workers that changed level within this very step is not observable here.
      const settled = x.levelSeq <= this.#stepLevelSeq &&
        w.levelSeq <= this.#stepLevelSeq &&
        xHi === this.#load(x, false) && this.#load(w, true) === myLo;
      this.#check(
        !(xHi < myLo || (settled && xHi === myLo && x.levelSeq < w.levelSeq)),
        "lowestLoad",
        () =>
          `${id} went to ${conn} (load ${myLo}, at that level since #${w.levelSeq}) over ${x.conn} (load ${xHi}, since #${x.levelSeq})`,
      );
    }
    if (viaAffinity) {
      this.#check(
        myLo <= bestHi + this.#c.affinityLoadMargin,
        "cacheAffinity",
        () =>
          `${id} (key ${r.cacheKey}) went to its remembered ${conn} at load ${myLo} while another free worker had load ${bestHi} (margin ${this.#c.affinityLoadMargin})`,
      );
    } else if (preferred !== undefined) this.#checkAffinityMissed(r, conn);
    if (akey !== null) this.#affinity.set(akey, conn);
    // FIFO (C9, C10): on arrival nothing a free worker could serve may wait; from
    // the queue, no older request of the same (priority, tenant) this worker serves.
    if (this.#queued > (isNew ? 0 : 1)) {
      for (const q of this.#reqs.values()) {
        if (q.status !== "queued" || q === r || q.order > r.order) continue;
        if (!isNew && (q.tenant !== r.tenant || q.priority !== r.priority)) {
          continue;
        }
        if (!this.#mayGo(q, w)) continue;
        this.#check(
          !(w.acked.has(q.model) || w.wildcard),
          "fifo",
          () =>
            `${id} (order ${r.order}, ${r.priority}/${r.tenant}) went to ${conn} while older ${q.id} (order ${q.order}, "${q.model}", ${q.priority}/${q.tenant}) waits`,
        );
      }
    }
    // A newcomer for a model others wait for goes through the queue (C9): when
    // it leaves at once (the waiting ones wait for another worker, issue 14),
    // the scheduler has served its tenant all the same.
    const viaQueue = !isNew ||
      [...this.#reqs.values()].some((q) =>
        q.status === "queued" && q.model === r.model
      );
    if (viaQueue) this.#scheduled(r);
    this.sched.dispatched[r.priority]++;
    if (isNew) this.#reqs.set(r.id, r);
    else this.#dequeued(r);
    r.status = "dispatched";
    r.conn = conn;
    w.assigned.add(r.id);
    w.lastDispatch = ++this.#dispatches;
    this.#sync(w);
  }

  /** Whether some worker is certainly free for `model` right now (C7, C42 with `*`). */
  #certainlyFree(model: string): boolean {
    for (const x of this.#workers.values()) {
      if (!x.registered || x.draining || !this.#circuitLets(x)) continue;
      if (!x.acked.has(model) && !x.wildcard) continue;
      if (this.#load(x, true) < x.max) return true;
    }
    return false;
  }

  /** `#certainlyFree` for a request that avoids the worker that refused it. */
  #freeFor(q: MReq): boolean {
    for (const x of this.#workers.values()) {
      if (!x.registered || x.draining || !this.#circuitLets(x)) continue;
      if (!x.acked.has(q.model) && !x.wildcard) continue;
      if (this.#load(x, true) < x.max && this.#mayGo(q, x)) return true;
    }
    return false;
  }

  /**
   * The key's remembered worker was passed over: fine only if it was not certainly
   * free or was busier than the best by more than the margin. Checked only when
   * every load involved is settled (no cancel grace ending at this tick).
   */
  #checkAffinityMissed(r: MReq, conn: string): void {
    const p = this.#workers.get(
      this.#affinity.get(`${r.model}\u0000${r.cacheKey}`)!,
    );
    if (p === undefined || !p.registered || p.draining) return;
    if (!p.acked.has(r.model) && !p.wildcard) return;
    if (!this.#circuitLets(p) || !this.#mayGo(r, p)) return;
    const exactFree = [...this.#workers.values()].some((x) =>
      x.registered && !x.draining && x.acked.has(r.model) &&
      this.#load(x, true) < x.max
    );
    let bestLo = Infinity;
    for (const x of this.#workers.values()) {
      if (!x.registered || x.draining) continue;
      if (!(x.acked.has(r.model) || (x.wildcard && !exactFree))) continue;
      const hi = this.#load(x, true);
      if (hi !== this.#load(x, false)) return;
      if (hi < x.max && hi < bestLo) bestLo = hi;
    }
    const pLoad = this.#load(p, true);
    if (pLoad !== this.#load(p, false) || pLoad >= p.max) return;
    if (!p.acked.has(r.model) && exactFree) return; // C42: `*` only when no exact match is free
    this.#check(
      pLoad > bestLo + this.#c.affinityLoadMargin,
      "cacheAffinity",
      () =>
        `${r.id} (key ${r.cacheKey}) went to ${conn}, but its remembered ${p.conn} was free at load ${pLoad} within margin ${this.#c.affinityLoadMargin} of the best ${bestLo}`,
    );
  }

  /**
   * Spec 004 scheduling, checked at each dispatch from the queue against the
   * requests still waiting (a deliberately simple view: which classes and tenants
   * have a request some certainly-free worker could take right now).
   */
  #scheduled(r: MReq): void {
    const byModel = new Map<string, boolean>();
    const free = (model: string): boolean => {
      let f = byModel.get(model);
      if (f === undefined) {
        f = this.#certainlyFree(model);
        byModel.set(model, f);
      }
      return f;
    };
    const classReady = new Set<Priority>();
    /** Tenants of r's class with a dispatchable request, and one such request each. */
    const tenantsReady = new Map<string, string>();
    for (const q of this.#reqs.values()) {
      if (q.status !== "queued" || q === r) continue;
      q.waited++;
      if (!(q.avoid === null ? free(q.model) : this.#freeFor(q))) continue;
      classReady.add(q.priority);
      if (q.priority === r.priority && !tenantsReady.has(q.tenant)) {
        tenantsReady.set(q.tenant, q.id);
      }
    }
    const wts = this.#c.priorityWeights;
    const c = r.priority;
    // priorityOrder: runs of a lower class while a higher one stays dispatchable.
    for (const h of CLASSES) {
      if (h === c || !classReady.has(h)) {
        this.#lowerRuns.delete(h); // served, or not (certainly) waiting: a new window
        continue;
      }
      if (RANK[h] > RANK[c]) continue;
      let runs = this.#lowerRuns.get(h);
      if (runs === undefined) {
        runs = new Map();
        this.#lowerRuns.set(h, runs);
      }
      const n = (runs.get(c) ?? 0) + 1;
      runs.set(c, n);
      const bound = Math.ceil(wts[c] / wts[h]);
      this.#check(
        n <= bound,
        "priorityOrder",
        () =>
          `${r.id} (${c}, tenant ${r.tenant}) is the ${n}th ${c} dispatch since the last ${h} one while ${h} requests stayed dispatchable (weights ${h} ${
            wts[h]
          }, ${c} ${wts[c]}: at most ${bound})`,
      );
    }
    if (c === "low" && classReady.has("high")) this.sched.lowWhileHighWaits++;
    // noStarvation: how long low waits while it stays dispatchable.
    if (c === "low" || !classReady.has("low")) this.#lowRun = 0;
    else {
      this.#lowRun++;
      if (this.#lowRun > this.sched.maxLowWait) {
        this.sched.maxLowWait = this.#lowRun;
      }
      let bound = 0;
      for (const h of CLASSES) {
        if (h !== "low") bound += Math.floor(wts[h] / wts.low) + 1;
      }
      this.#check(
        this.#lowRun <= bound,
        "noStarvation",
        () =>
          `${this.#lowRun} dispatches of higher classes in a row (now ${r.id}, ${c}) while a low request stayed dispatchable (bound ${bound} for weights ${wts.high}/${wts.normal}/${wts.low})`,
      );
    }
    // fairnessBound: round-robin over the tenants of r's class.
    for (const [tenant, qid] of tenantsReady) {
      if (tenant === r.tenant) continue;
      const key = `${c}|${tenant}`;
      let ahead = this.#servedAhead.get(key);
      if (ahead === undefined) {
        ahead = new Set();
        this.#servedAhead.set(key, ahead);
      }
      this.#check(
        !ahead.has(r.tenant),
        "fairnessBound",
        () =>
          `${r.id}: tenant ${r.tenant} served again in class ${c} while tenant ${tenant} has waited with dispatchable ${qid} since others were served: ${
            [...ahead!].join(",")
          } (${tenantsReady.size - 1} other tenant(s) ready now)`,
      );
      ahead.add(r.tenant);
      if (ahead.size > this.sched.maxOthersAhead) {
        this.sched.maxOthersAhead = ahead.size;
      }
    }
    this.#servedAhead.delete(`${c}|${r.tenant}`);
  }

  /** Rate limits (004): the sliding window as the observer counts it, checked at arrival. */
  #rateCheck(nr: MReq, code: string | null): void {
    if (code !== null && BEFORE_RATE.has(code)) return;
    const limit = this.#c.rateLimits[nr.tenant] ?? this.#c.defaultRateLimit;
    const refused = code === "rate_limit_exceeded";
    if (limit === null) {
      this.#check(
        !refused,
        "rateLimit",
        () => `${nr.id} (tenant ${nr.tenant}) refused with 429 without a limit`,
      );
      if (!refused) this.sched.admitted++;
      return;
    }
    const since = this.#now - limit.windowMs;
    const times = (this.#windows.get(nr.tenant) ?? []).filter((t) => t > since);
    if (refused) {
      this.sched.rateLimited++;
      this.#check(
        times.length >= limit.limit,
        "rateLimit",
        () =>
          `${nr.id} (tenant ${nr.tenant}) refused with 429 at ${this.#now} with only ${times.length} of ${limit.limit} admissions in the last ${limit.windowMs} ms`,
      );
    } else {
      this.sched.admitted++;
      this.#check(
        times.length < limit.limit,
        "rateLimit",
        () =>
          `${nr.id} (tenant ${nr.tenant}) admitted at ${this.#now} with ${times.length} of ${limit.limit} already in the last ${limit.windowMs} ms (admitted at ${
            times.join(",")
          })`,
      );
      times.push(this.#now);
    }
    this.#windows.set(nr.tenant, times);
  }

  // -- after the step ---------------------------------------------------------

  afterStep(state: State): void {
    const e = this.#event!;
    const nr = this.#newReq;
    if (nr !== null) {
      const ended = this.#endedNow.get(nr.id);
      this.#rateCheck(nr, ended?.code ?? null);
      let tenantQueued = 0;
      for (const q of this.#reqs.values()) {
        if (q.status === "queued" && q.tenant === nr.tenant) tenantQueued++;
      }
      if (ended === undefined && !this.#reqs.has(nr.id)) {
        this.#check(
          this.#queuedBefore < this.#c.queueLenMax &&
            tenantQueued < this.#c.tenantQueueLenMax,
          "queueBound",
          () =>
            `${nr.id} queued with ${this.#queuedBefore} already waiting (max ${this.#c.queueLenMax}), ${tenantQueued} of tenant ${nr.tenant} (max ${this.#c.tenantQueueLenMax})`,
        );
        this.#reqs.set(nr.id, nr);
        this.#enqueued(nr);
      } else if (ended?.code === "queue_full") {
        this.#check(
          this.#queuedBefore >= this.#c.queueLenMax ||
            tenantQueued >= this.#c.tenantQueueLenMax,
          "queueBound",
          () =>
            `${nr.id} refused as queue_full with only ${this.#queuedBefore} waiting, ${tenantQueued} of tenant ${nr.tenant}`,
        );
      }
    }
    for (const [id, ended] of this.#endedNow) {
      this.#check(
        this.#finishedNow.has(id),
        "endsExactlyOnce",
        () => `${id} answered (${ended.how}) without requestFinished`,
      );
      if (ended.conn === null) continue;
      const alive = this.#workers.has(ended.conn);
      const byItsWorker =
        ((e.kind === "completeReceived" || e.kind === "workerErrorReceived") &&
          e.workerId === ended.conn && e.requestId === id) ||
        oversizedComplete(e, ended.conn, id);
      this.#check(
        ended.cancelled || !alive || byItsWorker,
        "cancelWhenAbandoned",
        () =>
          `${id} on ${ended.conn} ended (${ended.how} ${ended.code}) without a cancel to its worker`,
      );
    }
    for (const id of this.#cancelsNow) {
      this.#check(
        this.#endedNow.has(id),
        "cancelWhenAbandoned",
        () => `cancel sent for ${id} which was not abandoned in this step`,
      );
    }
    this.#check(
      state.requests.size === this.#reqs.size &&
        queueDepth(state) === this.#queued,
      "observerAgrees",
      () =>
        `core has ${state.requests.size} open / ${
          queueDepth(state)
        } queued, observer ${this.#reqs.size} / ${this.#queued}`,
    );
    if (this.#dropped || e.kind === "tick" || this.#queued > 0) {
      for (const r of this.#reqs.values()) {
        if (r.status === "queued") {
          this.#check(
            r.requeues <= this.#c.requeueCountMax,
            "requeueCap",
            () => `${r.id} waits after ${r.requeues} requeues`,
          );
        } else if (this.#dropped) {
          this.#check(
            this.#workers.has(r.conn!),
            "noSplice",
            () =>
              `${r.id} (${r.status}) still assigned to closed worker ${r.conn}`,
          );
        }
      }
    }
    this.#afterLifecycle(e, state);
    if (e.kind === "tick") this.#afterTick(e.atMs, state);
  }

  #deadline(r: MReq): number {
    const arrival = r.arrivedAtMs + this.#c.requestTimeoutMs;
    let d = r.status === "queued"
      ? Math.min(
        (r.firstQueuedAtMs ?? r.queuedAtMs) + this.#c.queueTimeoutMs,
        arrival,
      )
      : r.status === "dispatched"
      ? arrival
      : r.lastChunkAtMs + this.#c.requestTimeoutMs;
    if (this.#shutdownDeadline !== null && this.#shutdownDeadline < d) {
      d = this.#shutdownDeadline;
    }
    return d;
  }

  #afterTick(now: number, state: State): void {
    // Ticks come every tickMs: past a deadline, the first tick ends the request.
    for (const r of this.#reqs.values()) {
      const d = this.#deadline(r);
      this.#check(
        d > now,
        "deadline",
        () =>
          `${r.id} (${r.status}, arrived ${r.arrivedAtMs}, ${r.requeues} requeues) still open at tick ${now}, deadline ${d} (tick ${this.#tickMs} ms)`,
      );
      const core = state.requests.get(r.id);
      if (core !== undefined) {
        this.#check(
          core.deadlineAtMs === r.arrivedAtMs + this.#c.requestTimeoutMs &&
            (core.status.kind !== "queued" ||
              core.status.queueDeadlineAtMs <= core.deadlineAtMs),
          "requeueCap",
          () => `${r.id} deadline moved to ${core.deadlineAtMs}`,
        );
      }
    }
    for (const w of this.#workers.values()) {
      for (const [id, g] of w.cancelling) if (now >= g) w.cancelling.delete(id);
      this.#sync(w);
    }
  }
}
