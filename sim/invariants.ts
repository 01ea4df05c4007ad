// The observer: a deliberately simpler model of the relay (per request: open or
// ended, queued or on which worker, chunks seen; per worker: acked models, slots,
// draining) fed with every event and every effect, and the named invariants
// checked against it after every step (conventions §6). Each violation carries
// its name and checklist numbers.
import {
  type Effect,
  type Event,
  queueDepth,
  type State,
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
  fifo: "C9/C10 FIFO among requests a free worker can serve",
  lowestLoad: "C8 lowest load wins, ties round-robin",
  observerAgrees: "C34 core and observer agree on open and queued requests",
  liveness: "C34 heal phase: every request ends within bounded steps",
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
};

type MReq = {
  id: string;
  model: string;
  streaming: boolean;
  arrivedAtMs: number;
  order: number;
  requeues: number;
  status: "queued" | "dispatched" | "streaming";
  queuedAtMs: number;
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
  lastDispatch: number;
  /** Load level the worker is routable at (null: not routable) and when it got there. */
  level: number | null;
  levelSeq: number;
  advertised: { models: string[]; max: number; load: number } | null;
};

type Ended = {
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

  constructor(c: ObserverConfig, tickMs: number) {
    this.#c = c;
    this.#tickMs = tickMs;
  }

  get openCount(): number {
    return this.#reqs.size;
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
    this.#stepLevelSeq = this.#levelSeq;
    switch (e.kind) {
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
          streaming: e.isStreaming,
          arrivedAtMs: e.atMs,
          order: ++this.#order,
          requeues: 0,
          status: "queued",
          queuedAtMs: e.atMs,
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
        w.level = null; // re-filed under its new models: back of its level
        this.#sync(w);
        return;
      }
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
        if (
          e.kind === "workerErrorReceived" && r !== undefined &&
          r.conn === w.conn && r.status === "dispatched"
        ) this.#requeue(r, w);
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
        load < w.max
        ? load
        : null;
    if (level !== w.level) {
      w.level = level;
      w.levelSeq = ++this.#levelSeq;
    }
  }

  #requeue(r: MReq, w: MWorker | undefined): void {
    if (w !== undefined) {
      w.assigned.delete(r.id);
      this.#lowerLoad(w);
    }
    r.status = "queued";
    r.queuedAtMs = this.#now;
    r.requeues++;
    r.conn = null;
    this.#queued++;
  }

  #dropConn(conn: string): void {
    const w = this.#workers.get(conn);
    if (w === undefined) return;
    this.#workers.delete(conn);
    this.#dropped = true;
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
          lastDispatch: 0,
          level: null,
          levelSeq: 0,
          advertised: null,
        });
        return;
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
        const ps = pieces(f.body);
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
        if (nr !== null && nr.id === f.requestId && !this.#reqs.has(nr.id)) {
          this.#check(
            !this.#ended.has(nr.id),
            "endsExactlyOnce",
            () => `${nr.id} ended twice`,
          );
          this.#ended.add(nr.id);
          this.#endedNow.set(nr.id, {
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
    if (r.status === "queued") this.#queued--;
    let cancelled = false;
    if (conn !== null) {
      const w = this.#workers.get(conn);
      cancelled = this.#cancelsNow.has(r.id);
      if (w !== undefined) {
        w.assigned.delete(r.id);
        const byItsWorker = (e?.kind === "completeReceived" ||
          e?.kind === "workerErrorReceived") &&
          e.workerId === conn && e.requestId === r.id;
        if (byItsWorker) this.#lowerLoad(w);
      }
    }
    this.#endedNow.set(r.id, { conn, cancelled, how, code });
  }

  #writeChunk(id: string, chunk: string): void {
    const r = this.#open(id, "writeChunk");
    if (r === null) return;
    const e = this.#event;
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
        w.registered = true;
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
        }
        return;
      }
      case "request":
        return this.#dispatch(f.workerId, w, m.request_id);
      default:
        return;
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
    // Choice (C8, C42): nobody certainly better was free.
    const myLo = this.#load(w, false);
    for (const x of this.#workers.values()) {
      if (x === w || !x.registered || x.draining) continue;
      const xExact = x.acked.has(r.model);
      if (!xExact && !(x.wildcard && !exact)) continue;
      const xHi = this.#load(x, true);
      if (xHi >= x.max) continue;
      this.#check(
        exact || !xExact,
        "eligibleWorker",
        () =>
          `${id} for "${r.model}" went to wildcard ${conn} while ${x.conn} serves it exactly and is free`,
      );
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
    // FIFO (C9, C10): no older waiting request this free worker could serve.
    if (this.#queued > (isNew ? 0 : 1)) {
      for (const q of this.#reqs.values()) {
        if (q.status !== "queued" || q === r || q.order > r.order) continue;
        this.#check(
          !(w.acked.has(q.model) || w.wildcard),
          "fifo",
          () =>
            `${id} (order ${r.order}) went to ${conn} while older ${q.id} (order ${q.order}, "${q.model}") waits`,
        );
      }
    }
    if (isNew) this.#reqs.set(r.id, r);
    else this.#queued--;
    r.status = "dispatched";
    r.conn = conn;
    w.assigned.add(r.id);
    w.lastDispatch = ++this.#dispatches;
    this.#sync(w);
  }

  // -- after the step ---------------------------------------------------------

  afterStep(state: State): void {
    const e = this.#event!;
    const nr = this.#newReq;
    if (nr !== null) {
      const ended = this.#endedNow.get(nr.id);
      if (ended === undefined && !this.#reqs.has(nr.id)) {
        this.#check(
          this.#queuedBefore < this.#c.queueLenMax,
          "queueBound",
          () =>
            `${nr.id} queued with ${this.#queuedBefore} already waiting (max ${this.#c.queueLenMax})`,
        );
        this.#reqs.set(nr.id, nr);
        this.#queued++;
      } else if (ended?.code === "queue_full") {
        this.#check(
          this.#queuedBefore >= this.#c.queueLenMax,
          "queueBound",
          () =>
            `${nr.id} refused as queue_full with only ${this.#queuedBefore} waiting`,
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
        (e.kind === "completeReceived" || e.kind === "workerErrorReceived") &&
        e.workerId === ended.conn && e.requestId === id;
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
    if (e.kind === "tick") this.#afterTick(e.atMs, state);
  }

  #deadline(r: MReq): number {
    const arrival = r.arrivedAtMs + this.#c.requestTimeoutMs;
    let d = r.status === "queued"
      ? Math.min(r.queuedAtMs + this.#c.queueTimeoutMs, arrival)
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
