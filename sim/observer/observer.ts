// The observer: feeds every event and every effect of a run to its model of the
// relay (model.ts) and checks the named invariants (sim/invariants/, one file
// each) against it as the step goes and after it, always in the same order
// (conventions §6). The first violation is kept, with its name and checklist
// numbers.
import {
  chunkAsText,
  type ChunkData,
  type Effect,
  type Event,
  EXTENSION_CAPABILITIES,
  EXTENSION_STREAM_HEAD,
  piecesAsText,
  type State,
  SUPPORTED_EXTENSIONS,
} from "../../core/mod.ts";
import * as cacheAffinity from "../invariants/cache_affinity.ts";
import * as cancelWhenAbandoned from "../invariants/cancel_when_abandoned.ts";
import {
  type Check,
  type InvariantName,
  INVARIANTS,
  type Violation,
} from "../invariants/catalog.ts";
import * as chunkFromAssigned from "../invariants/chunk_from_assigned.ts";
import * as chunkOrder from "../invariants/chunk_order.ts";
import * as deadline from "../invariants/deadline.ts";
import * as dispatchOnlyToAccepting from "../invariants/dispatch_only_to_accepting.ts";
import type { Dispatch } from "../invariants/dispatch.ts";
import type { Scheduled } from "../invariants/scheduled.ts";
import * as drainingModelsStayRoutable from "../invariants/draining_models_stay_routable.ts";
import * as eligibleWorker from "../invariants/eligible_worker.ts";
import * as endsExactlyOnce from "../invariants/ends_exactly_once.ts";
import * as extensionFrames from "../invariants/extension_frames_only_to_negotiated.ts";
import * as fairnessBound from "../invariants/fairness_bound.ts";
import * as fifo from "../invariants/fifo.ts";
import * as lifecycleOnlyToCapable from "../invariants/lifecycle_only_to_capable.ts";
import * as lifecycleTaskEndsOnce from "../invariants/lifecycle_task_ends_once.ts";
import * as lowestLoad from "../invariants/lowest_load.ts";
import * as maxConcurrent from "../invariants/max_concurrent.ts";
import * as neverRunTwiceForSize from "../invariants/never_run_twice_for_size.ts";
import * as noSplice from "../invariants/no_splice.ts";
import * as noStarvation from "../invariants/no_starvation.ts";
import * as nothingAfterEnd from "../invariants/nothing_after_end.ts";
import * as observerAgrees from "../invariants/observer_agrees.ts";
import * as answerBytes from "../invariants/answer_bytes_counted.ts";
import * as priorityOrder from "../invariants/priority_order.ts";
import * as queueBound from "../invariants/queue_bound.ts";
import * as rateLimit from "../invariants/rate_limit.ts";
import * as tokenLimit from "../invariants/token_limit.ts";
import * as streamsCounted from "../invariants/streams_counted.ts";
import * as requeueCap from "../invariants/requeue_cap.ts";
import * as retryElsewhere from "../invariants/retry_elsewhere.ts";
import * as streamCarriesOnlyBackendBytes from "../invariants/stream_carries_only_backend_bytes.ts";
import * as wholeSseEvents from "../invariants/whole_sse_events.ts";
import * as streamHead from "../invariants/stream_head_from_its_worker.ts";
import {
  clampMax,
  type LifecycleStats,
  Model,
  type MReq,
  type MWorker,
  newWorker,
  type ObserverConfig,
  sanitize,
  type SchedStats,
} from "../model/model.ts";
import { pieces } from "../model/pieces.ts";

export class Observer {
  readonly #m: Model;
  /** Answers handed over whose clients have not taken all their bytes. */
  readonly #held: answerBytes.Held = new Map();
  #checks = 0;
  #violation: Violation | null = null;
  /** Bound once: the invariants call it as a plain function. */
  readonly #check: Check = (ok, name, message) => {
    this.#checks++;
    if (!ok) this.#fail(name, message());
  };

  constructor(c: ObserverConfig, tickMs: number) {
    this.#m = new Model(c, tickMs);
  }

  get checks(): number {
    return this.#checks;
  }

  get violation(): Violation | null {
    return this.#violation;
  }

  /** Scheduling measurements (spec 004) the named scenarios assert on. */
  get sched(): SchedStats {
    return this.#m.sched;
  }

  /** Lifecycle statistics the scenario tests assert on. */
  get lifecycle(): LifecycleStats {
    return this.#m.lifecycle;
  }

  get openCount(): number {
    return this.#m.reqs.size;
  }

  /** Lifecycle tasks not yet completed or failed. */
  get openTasks(): number {
    return this.#m.openTasks;
  }

  #fail(name: InvariantName, message: string): void {
    if (this.#violation === null) {
      this.#violation = { name, contract: INVARIANTS[name], message };
    }
  }

  failLiveness(message: string): void {
    this.#fail("liveness", message);
  }

  // -- before the reducer runs ------------------------------------------------

  beforeStep(e: Event): void {
    const m = this.#m;
    const check = this.#check;
    m.startStep(e);
    answerBytes.clientReported(this.#held, e);
    switch (e.kind) {
      case "lifecycleRequested":
        return this.#taskRequested(e);
      case "lifecycleProgressReceived": {
        const t = m.tasks.get(e.taskId);
        if (
          e.status !== "running" && t !== undefined && !t.ended &&
          t.sent.has(e.workerId) && t.parts.get(e.workerId) === "running" &&
          m.workers.get(e.workerId)?.registered === true
        ) m.finalReport = { task: t, conn: e.workerId, status: e.status };
        return;
      }
      case "requestReceived":
        endsExactlyOnce.requestIdFresh(m, check, e);
        m.queuedBefore = m.queued;
        m.newReq = arrivingRequest(e, ++m.order);
        return;
      case "registerReceived": {
        const w = m.workers.get(e.workerId);
        if (w !== undefined && !w.registered) {
          w.advertised = {
            models: e.models,
            max: e.maxConcurrent,
            load: e.currentLoad,
          };
          w.listed = e.extensions ?? null;
          w.prefixes = [
            ...new Set((e.endpointPrefixes ?? []).map((p) => p.trim())),
          ].filter((p) => p !== "");
        }
        return;
      }
      case "pongReceived": {
        const w = m.workers.get(e.workerId);
        if (w?.registered && e.currentLoad !== null) {
          w.reportedLoad = e.currentLoad;
          m.sync(w);
        }
        return;
      }
      case "modelsUpdateReceived":
        return this.#modelsUpdated(e);
      case "headReceived": {
        // The core keeps a negotiated worker's head for its own stream that
        // has not started (core/events/on_head_received.ts).
        const w = m.workers.get(e.workerId);
        const r = m.reqs.get(e.requestId);
        if (
          w?.registered === true && w.ext.has(EXTENSION_STREAM_HEAD) &&
          r !== undefined && r.conn === w.conn && r.streaming &&
          r.status === "dispatched"
        ) r.head = { status: e.statusCode, headers: e.headers };
        return;
      }
      case "chunkReceived": {
        const w = m.workers.get(e.workerId);
        const r = m.reqs.get(e.requestId);
        if (
          w?.registered === true && r !== undefined && r.conn === w.conn &&
          (!r.streaming || r.status === "dispatched")
        ) m.backendAnswered(w);
        return;
      }
      case "workerFrameInvalid":
        return this.#frameInvalid(e);
      case "tick":
        for (const w of m.workers.values()) {
          const c = w.circuit;
          if (c.kind === "open" && e.atMs >= c.untilMs) {
            w.circuit = { kind: "trial", coolDownMs: c.coolDownMs };
            m.sync(w);
          }
        }
        return;
      case "completeReceived":
      case "workerErrorReceived":
        return this.#workerAnswered(e);
      case "workerDisconnected":
        m.dropConn(e.workerId);
        return;
      case "shutdownRequested":
        if (m.shutdownDeadline === null) {
          m.shutdownDeadline = e.atMs + m.c.drainTimeoutMs;
        }
        return;
      default:
        return;
    }
  }

  #taskRequested(e: Extract<Event, { kind: "lifecycleRequested" }>): void {
    const m = this.#m;
    lifecycleTaskEndsOnce.taskIdFresh(m, this.#check, e);
    m.tasks.set(e.taskId, {
      id: e.taskId,
      createdAtMs: e.atMs,
      operation: e.operation,
      model: e.modelId,
      target: e.workerId,
      sent: new Set(),
      parts: new Map(),
      ended: false,
    });
    m.openTasks++;
    m.lifecycle.tasks++;
  }

  #modelsUpdated(e: Extract<Event, { kind: "modelsUpdateReceived" }>): void {
    const m = this.#m;
    const w = m.workers.get(e.workerId);
    if (w?.registered !== true) return;
    const models = sanitize(e.models, m.c);
    w.acked = new Set(models.filter((x) => x !== "*"));
    w.wildcard = models.includes("*");
    if (e.currentLoad !== null) w.reportedLoad = e.currentLoad;
    if (e.draining === true && !w.draining) {
      w.draining = true;
      w.selfDraining = true;
    }
    w.level = null; // re-filed under its new models: back of its level
    m.sync(w);
  }

  #frameInvalid(e: Extract<Event, { kind: "workerFrameInvalid" }>): void {
    const m = this.#m;
    const o = e.error.oversized;
    if (o === undefined) return;
    const w = m.workers.get(e.workerId);
    if (o.type === "response_complete" && w?.cancelling.delete(o.requestId)) {
      m.lowerLoad(w); // an oversized acknowledgment still frees the slot (C44)
      return;
    }
    const r = m.reqs.get(o.requestId);
    if (r !== undefined && r.conn === e.workerId) r.tooLarge = true;
  }

  /** A worker's response_complete or error for a request (before the core sees it). */
  #workerAnswered(
    e: Extract<Event, { kind: "completeReceived" | "workerErrorReceived" }>,
  ): void {
    const m = this.#m;
    const w = m.workers.get(e.workerId);
    if (w?.registered !== true || e.requestId === null) return;
    if (w.cancelling.has(e.requestId)) {
      w.cancelling.delete(e.requestId); // C44 acknowledgment frees the slot
      m.lowerLoad(w);
      return;
    }
    const r = m.reqs.get(e.requestId);
    if (r === undefined || r.conn !== w.conn || r.status === "queued") return;
    if (e.kind === "completeReceived") return m.backendAnswered(w);
    if (r.status === "dispatched") m.requeue(r, w, w.conn);
    if (e.code === "backend_unavailable") m.backendFailed(w);
  }

  // -- each effect, in order --------------------------------------------------

  effect(f: Effect): void {
    const m = this.#m;
    const check = this.#check;
    switch (f.kind) {
      case "acceptWorker":
        m.workers.set(f.workerId, newWorker(f.workerId));
        return;
      case "lifecycleTaskChanged":
        return lifecycleTaskEndsOnce.taskChangedOnce(m, check, f.task);
      case "closeWorker":
        m.dropConn(f.workerId);
        return;
      case "sendToWorker":
        return this.#sendToWorker(f);
      case "startStream":
        return this.#startStream(f);
      case "writeChunk":
        return this.#writeChunk(f.requestId, f.chunk);
      case "respond":
        answerBytes.handedOver(this.#held, f);
        return this.#respond(f);
      case "respondError":
        return this.#respondError(f);
      case "endStream":
        return this.#endStream(f);
      case "requestFinished":
        return this.#requestFinished(f);
      default:
        return;
    }
  }

  #startStream(f: Extract<Effect, { kind: "startStream" }>): void {
    const m = this.#m;
    const check = this.#check;
    const r = nothingAfterEnd.openRequest(m, check, f.requestId, f.kind);
    if (r === null) return;
    chunkFromAssigned.streamStartsOnItsChunk(check, r, m.event);
    streamHead.opensWithItsHead(check, r, f.head);
    r.status = "streaming";
  }

  #endStream(f: Extract<Effect, { kind: "endStream" }>): void {
    const m = this.#m;
    const check = this.#check;
    const r = nothingAfterEnd.openRequest(m, check, f.requestId, f.kind);
    if (r === null) return;
    endsExactlyOnce.endStreamOnlyWhileStreaming(check, r);
    streamCarriesOnlyBackendBytes.failureEndsWithError(
      check,
      r.id,
      m.event,
      f.error,
    );
    wholeSseEvents.breaksBetweenEvents(
      check,
      r,
      r.conn === null ? undefined : m.workers.get(r.conn),
      f.error,
    );
    m.end(r, f.kind, f.error?.code ?? "");
  }

  #respond(f: Extract<Effect, { kind: "respond" }>): void {
    const m = this.#m;
    const check = this.#check;
    const r = nothingAfterEnd.openRequest(m, check, f.requestId, "respond");
    if (r === null) return;
    chunkFromAssigned.respondsToItsCompletion(check, r, m.event);
    // A JSON error body (a failing backend, a worker's 502/503) carries no pieces.
    const body = piecesAsText(f.bodyPieces ?? [], f.body);
    const ps = f.status >= 400 && body.startsWith("{") ? [] : pieces(body);
    ps.forEach((p, i) => {
      noSplice.bodyPieceFromAssigned(check, r, p);
      chunkOrder.bodyPieceInOrder(check, r, p, i, ps.length, body);
    });
    return m.end(r, f.kind, "");
  }

  #respondError(f: Extract<Effect, { kind: "respondError" }>): void {
    const m = this.#m;
    const check = this.#check;
    const nr = m.newReq;
    if (
      nr !== null && nr.id === f.requestId &&
      f.error.code === "model_not_found"
    ) drainingModelsStayRoutable.notFoundOnlyWithoutHolder(m, check, nr);
    if (
      nr !== null && nr.id === f.requestId &&
      (f.error.code === "model_not_found" ||
        f.error.code === "binary_body_unsupported")
    ) {
      dispatchOnlyToAccepting.refusedOnlyWithoutTaker(
        m,
        check,
        nr,
        f.error.code,
      );
      const held = [...m.workers.values()].some((x) =>
        x.registered && (x.acked.has(nr.model) || x.wildcard)
      );
      if (held) m.sched.pathRefusals++;
    }
    if (nr !== null && nr.id === f.requestId && !m.reqs.has(nr.id)) {
      endsExactlyOnce.refusedOnce(m, check, nr);
      m.ended.add(nr.id);
      m.endedNow.set(nr.id, {
        tenant: nr.tenant,
        conn: null,
        cancelled: false,
        how: f.kind,
        code: f.error.code,
        streaming: nr.streaming,
        chunks: 0,
      });
      return;
    }
    const r = nothingAfterEnd.openRequest(
      m,
      check,
      f.requestId,
      "respondError",
    );
    if (r === null) return;
    endsExactlyOnce.noErrorAfterStreamStart(check, r);
    return m.end(r, f.kind, f.error.code);
  }

  #requestFinished(f: Extract<Effect, { kind: "requestFinished" }>): void {
    const m = this.#m;
    const check = this.#check;
    const e = m.event;
    if (
      e?.kind === "clientDisconnected" && e.requestId === f.requestId &&
      !m.endedNow.has(f.requestId)
    ) {
      // The client is gone: nobody to answer, the request just ends (C18).
      const r = nothingAfterEnd.openRequest(
        m,
        check,
        f.requestId,
        "requestFinished",
      );
      if (r !== null) m.end(r, f.kind, "client_gone");
    }
    endsExactlyOnce.finishedAfterOneAnswer(m, check, f);
    observerAgrees.finishedTenantAgrees(
      check,
      f.requestId,
      f.tenant,
      m.endedNow.get(f.requestId),
    );
    m.finishedNow.add(f.requestId);
    tokenLimit.charge(m, f);
    streamsCounted.finishedStreamCounted(
      m,
      check,
      f,
      m.endedNow.get(f.requestId),
    );
    requeueCap.finishedWithinCap(m, check, f.requestId, f.requeues);
    endsExactlyOnce.rejectedOnlyOnArrival(m, check, f);
    return;
  }

  #writeChunk(id: string, chunk: ChunkData): void {
    const m = this.#m;
    const check = this.#check;
    const r = nothingAfterEnd.openRequest(m, check, id, "writeChunk");
    if (r === null) return;
    streamCarriesOnlyBackendBytes.failureNotWritten(check, id, m.event);
    chunkFromAssigned.chunkWrittenFromItsWorker(check, r, m.event, chunk);
    const text = chunkAsText(chunk);
    wholeSseEvents.noEventAfterPartial(check, r, text);
    wholeSseEvents.afterChunk(r, text);
    for (const p of pieces(text)) {
      noSplice.streamFromOneWorker(check, r, p);
      r.chunkConn ??= p.conn;
      chunkFromAssigned.pieceFromAssigned(check, r, p);
      chunkOrder.streamPieceInOrder(check, r, p);
      r.nextSeq++;
    }
    r.lastChunkAtMs = m.now;
  }

  #sendToWorker(f: Extract<Effect, { kind: "sendToWorker" }>): void {
    const m = this.#m;
    const check = this.#check;
    const w = m.workers.get(f.workerId);
    const msg = f.message;
    switch (msg.type) {
      case "register_ack": {
        if (w === undefined || w.advertised === null) {
          return eligibleWorker.ackToKnownWorker(check, f.workerId);
        }
        const adv = sanitize(w.advertised.models, m.c);
        eligibleWorker.ackedOnlyAdvertised(check, w, msg.models, adv);
        const listed = w.listed ?? null;
        extensionFrames.ackExtensionsOnlyWhenListed(
          check,
          w,
          msg.extensions,
          listed,
        );
        w.ext = new Set(
          SUPPORTED_EXTENSIONS.filter((x) => listed?.includes(x) === true),
        );
        w.registered = true;
        // The core keeps its workers in registration order and frees cancel graces at
        // a tick in that order, so the observer files them in the same order.
        m.workers.delete(w.conn);
        m.workers.set(w.conn, w);
        w.acked = new Set(msg.models.filter((x) => x !== "*"));
        w.wildcard = msg.models.includes("*");
        w.max = clampMax(w.advertised.max, m.c);
        w.reportedLoad = w.advertised.load;
        m.sync(w);
        return;
      }
      case "graceful_shutdown":
        if (w !== undefined) {
          w.draining = true;
          m.sync(w);
        }
        return;
      case "cancel": {
        const r = m.reqs.get(msg.request_id);
        cancelWhenAbandoned.cancelToItsWorker(
          check,
          f.workerId,
          msg.request_id,
          r,
          w,
        );
        m.cancelsNow.add(msg.request_id);
        if (w !== undefined && r !== undefined && r.conn === w.conn) {
          w.assigned.delete(r.id);
          w.cancelling.set(r.id, m.now + m.c.cancelGraceMs);
          m.sync(w);
        }
        return;
      }
      case "request":
        return this.#dispatch(f.workerId, w, msg.request_id);
      default: {
        extensionFrames.frameNegotiated(check, f.workerId, w, msg.type);
        if (msg.type === "lifecycle_request") {
          lifecycleOnlyToCapable.sentOnlyToCapable(
            m,
            check,
            f.workerId,
            w,
            msg.task_id,
            msg.operation,
            msg.params,
          );
        }
        return;
      }
    }
  }

  #dispatch(conn: string, w: MWorker | undefined, id: string): void {
    const m = this.#m;
    const check = this.#check;
    const nr = m.newReq;
    const isNew = nr !== null && nr.id === id && !m.reqs.has(id) &&
      !m.ended.has(id);
    const r = isNew ? nr : m.reqs.get(id);
    endsExactlyOnce.dispatchedOnlyWhenQueued(check, id, r);
    if (r === undefined || r.status !== "queued") return;
    eligibleWorker.dispatchedToRegistered(check, id, conn, w);
    if (w === undefined || !w.registered) return;
    const d: Dispatch = { m, check, id, conn, r, w };
    eligibleWorker.dispatchedToNotDraining(d);
    dispatchOnlyToAccepting.dispatchedToAccepting(d);
    if (
      [...m.workers.values()].some((x) =>
        x.registered && (x.acked.has(r.model) || x.wildcard) &&
        !m.accepts(x, r)
      )
    ) m.sched.restrictedDispatches++;
    retryElsewhere.circuitLetsDispatch(d);
    retryElsewhere.notBackToRefuser(d);
    neverRunTwiceForSize.notRedispatchedWhenTooLarge(check, id, r);
    const exact = w.acked.has(r.model);
    eligibleWorker.dispatchedToHolder(d, exact);
    maxConcurrent.slotFree(d);
    requeueCap.dispatchedWithinCap(m, check, id, r);
    // Cache affinity (004): the key's remembered worker may win within the margin.
    const akey = r.cacheKey === null ? null : `${r.model}\u0000${r.cacheKey}`;
    const preferred = akey === null ? undefined : m.affinity.get(akey);
    const viaAffinity = preferred === conn;
    if (viaAffinity) m.sched.affinityHits++;
    // Choice (C8, C42): nobody certainly better was free.
    const myLo = m.load(w, false);
    let bestHi = Infinity;
    for (const x of m.workers.values()) {
      if (x === w || !x.registered || x.draining) continue;
      if (!m.circuitLets(x) || x.conn === r.avoid) continue;
      if (!m.accepts(x, r)) continue;
      const xExact = x.acked.has(r.model);
      if (!xExact && !(x.wildcard && !exact)) continue;
      const xHi = m.load(x, true);
      if (xHi >= x.max) continue;
      if (xHi < bestHi) bestHi = xHi;
      eligibleWorker.exactBeforeWildcard(d, exact, x, xExact);
      if (viaAffinity) continue;
      lowestLoad.noLessLoaded(d, myLo, x, xHi);
    }
    if (viaAffinity) {
      cacheAffinity.rememberedWithinMargin(d, myLo, bestHi);
    } else if (preferred !== undefined) {
      cacheAffinity.passedOverOnlyWhenBusy(m, check, r, conn);
    }
    if (akey !== null) m.affinity.set(akey, conn);
    fifo.noOlderWaiting(d, isNew);
    // A newcomer for a model others wait for goes through the queue (C9): when
    // it leaves at once (the waiting ones wait for another worker, issue 14),
    // the scheduler has served its tenant all the same.
    const viaQueue = !isNew ||
      [...m.reqs.values()].some((q) =>
        q.status === "queued" && q.model === r.model
      );
    if (viaQueue) this.#scheduled(r);
    m.sched.dispatched[r.priority]++;
    if (isNew) m.reqs.set(r.id, r);
    else m.dequeued(r);
    r.status = "dispatched";
    r.conn = conn;
    delete r.head; // a new dispatch: the next head is its worker's
    w.assigned.add(r.id);
    w.lastDispatch = ++m.dispatches;
    m.sync(w);
  }

  /** Spec 004 scheduling, checked at each dispatch from the queue against the requests still waiting. */
  #scheduled(r: MReq): void {
    const m = this.#m;
    const check = this.#check;
    const { classReady, tenantsReady } = m.readiness(r);
    const s: Scheduled = { m, check, r, classReady, tenantsReady };
    priorityOrder.lowerRunsBounded(s);
    if (r.priority === "low" && classReady.has("high")) {
      m.sched.lowWhileHighWaits++;
    }
    noStarvation.lowServedInTime(s);
    fairnessBound.noTenantServedTwiceAhead(s);
  }

  // -- after the step ---------------------------------------------------------

  afterStep(state: State): void {
    const m = this.#m;
    const check = this.#check;
    const e = m.event!;
    const nr = m.newReq;
    if (nr !== null) {
      const ended = m.endedNow.get(nr.id);
      rateLimit.admittedWithinLimit(m, check, nr, ended?.code ?? null);
      tokenLimit.admittedBelowTokenLimit(m, check, nr, ended?.code ?? null);
      let tenantQueued = 0;
      for (const q of m.reqs.values()) {
        if (q.status === "queued" && q.tenant === nr.tenant) tenantQueued++;
      }
      if (ended === undefined && !m.reqs.has(nr.id)) {
        queueBound.queuedBelowBound(m, check, nr, tenantQueued);
        m.reqs.set(nr.id, nr);
        m.enqueued(nr);
      } else if (ended?.code === "queue_full") {
        queueBound.fullOnlyAtBound(m, check, nr, tenantQueued);
      }
    }
    for (const [id, ended] of m.endedNow) {
      endsExactlyOnce.answeredAndFinished(m, check, id, ended);
      if (ended.conn === null) continue;
      cancelWhenAbandoned.endedWithCancel(m, check, e, id, ended, ended.conn);
    }
    for (const id of m.cancelsNow) {
      cancelWhenAbandoned.cancelOnlyWhenAbandoned(m, check, id);
    }
    observerAgrees.countsAgree(m, check, state);
    streamsCounted.chargedToEveryLimit(m, check, state);
    answerBytes.countedWhileHeld(check, this.#held, state);
    if (m.dropped || e.kind === "tick" || m.queued > 0) {
      for (const r of m.reqs.values()) {
        if (r.status === "queued") requeueCap.waitsWithinCap(m, check, r);
        else if (m.dropped) noSplice.notOnClosedWorker(m, check, r);
      }
    }
    this.#afterLifecycle(e, state);
    if (e.kind === "tick") this.#afterTick(e.atMs, state);
  }

  /** After each step: lifecycle promises that span the whole step. */
  #afterLifecycle(e: Event, state: State): void {
    const m = this.#m;
    const check = this.#check;
    lifecycleTaskEndsOnce.requestedAndReportedSeen(m, check, e);
    if (e.kind === "capabilitiesReceived") {
      const w = m.workers.get(e.workerId);
      if (w?.registered === true) {
        if (w.ext.has(EXTENSION_CAPABILITIES)) {
          const c = e.capabilities.models;
          w.reported = new Set([
            ...(c?.loaded ?? []).map((x) => x.id),
            ...(c?.loading ?? []).map((x) => x.id),
          ]);
        } else {
          extensionFrames.capabilitiesIgnored(check, state, e.workerId, w);
        }
      }
    }
    lifecycleTaskEndsOnce.noPartOutlivesWorkerOrTimeout(m, check, e);
  }

  #afterTick(now: number, state: State): void {
    const m = this.#m;
    const check = this.#check;
    for (const r of m.reqs.values()) {
      deadline.openBeforeDeadline(m, check, r, now);
      requeueCap.deadlineNotMoved(m, check, r, state);
    }
    for (const w of m.workers.values()) {
      for (const [id, g] of w.cancelling) if (now >= g) w.cancelling.delete(id);
      m.sync(w);
    }
  }
}

/** The observer's record of a request as it arrives (queued, nothing seen yet). */
function arrivingRequest(
  e: Extract<Event, { kind: "requestReceived" }>,
  order: number,
): MReq {
  return {
    id: e.requestId,
    model: e.model,
    tenant: e.tenant ?? "default",
    priority: e.priority ?? "normal",
    cacheKey: e.cacheKey ?? null,
    waited: 0,
    streaming: e.isStreaming,
    arrivedAtMs: e.atMs,
    order,
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
    path: e.endpointPath,
    binary: e.bodyBase64 === true,
    midEvent: false,
  };
}
