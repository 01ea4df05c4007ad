// The request lifecycle: queued -> dispatched -> streaming -> ended (done, failed
// or cancelled). Every way a request ends goes through `finish`, which removes it
// from state and emits exactly one `requestFinished` (C34: ends exactly once).
import { apiError, shuttingDown } from "../protocol/errors.ts";
import type { CacheReport, ClientError, Effect, Outcome } from "../effect.ts";
import type { CancelReason, TokenCounts } from "../protocol/messages.ts";
import { dequeue, enqueue, markServed, nextToDispatch } from "./queue.ts";
import { recordAffinity } from "./routing.ts";
import type { Request, State, Worker } from "./state.ts";
import { releaseSlot, syncRoute } from "./workers.ts";
import { settleTokens } from "./token_limit.ts";
import { noteDispatched, recordServiceMs } from "./residency.ts";
import { tokensOf, usageOf } from "./usage.ts";
import { dropBodyPieces } from "./body_budget.ts";
import { streamOpened } from "./wait_lines.ts";

/** The request `requestId` if it is assigned to `workerId` (dispatched or streaming), else undefined (C32). */
export function assignedRequest(
  state: State,
  workerId: string,
  requestId: string,
): Request | undefined {
  const request = state.requests.get(requestId);
  if (request === undefined || request.status.kind === "queued") {
    return undefined;
  }
  return request.status.workerId === workerId ? request : undefined;
}

/**
 * Removes the request and reports how it ended. The caller emits the client
 * effect; a request the backend answered passes on the backend's cache report
 * and token counts, which its tenant's and key's token limits are charged.
 */
export function finish(
  state: State,
  request: Request,
  outcome: Outcome,
  status: number,
  out: Effect[],
  cacheReport: CacheReport | null = null,
  tokenCounts: TokenCounts | null = null,
): void {
  if (request.status.kind === "queued") {
    dequeue(state, request);
    request.queueWaitMs += state.nowMs - request.queuedAtMs;
  }
  if (request.status.kind !== "queued") {
    // Moving average of service time per slot, for the Retry-After estimate.
    const serviceMs = state.nowMs - request.status.dispatchedAtMs;
    state.serviceMsAvg = state.serviceMsAvg === 0
      ? serviceMs
      : state.serviceMsAvg * 0.8 + serviceMs * 0.2;
    recordServiceMs(state, request, serviceMs);
  }
  state.requests.delete(request.id);
  dropBodyPieces(state, request);
  const usage = usageOf(request, tokenCounts, cacheReport);
  settleTokens(state, request, tokensOf(usage));
  const workerId = request.status.kind === "queued"
    ? null
    : request.status.workerId;
  out.push({
    kind: "requestFinished",
    requestId: request.id,
    route: request.endpointPath,
    model: request.model,
    tenant: request.tenant,
    outcome,
    status,
    durationMs: state.nowMs - request.arrivedAtMs,
    queueWaitMs: request.queueWaitMs,
    firstByteMs: request.status.kind === "streaming"
      ? request.status.firstByteAtMs - request.arrivedAtMs
      : null,
    requeues: request.requeueCount,
    cacheReport,
    keyId: request.key?.id ?? null,
    keyName: request.key?.name ?? null,
    modelAsked: request.modelAsked,
    modelServed: request.model,
    workerName: workerId === null
      ? null
      : state.workers.get(workerId)?.name ?? null,
    usage,
  });
}

/** Ends a request with an error: an SSE error event if its stream started, else a response. */
export function fail(
  state: State,
  request: Request,
  error: ClientError,
  outcome: Outcome,
  out: Effect[],
  cacheReport: CacheReport | null = null,
  tokenCounts: TokenCounts | null = null,
): void {
  // Issue 30: a stream opened by wait lines is started for its client too.
  if (request.status.kind === "streaming" || streamOpened(request)) {
    out.push({ kind: "endStream", requestId: request.id, error });
  } else {
    const waiting = request.status.kind === "queued"
      ? state.nowMs - request.queuedAtMs
      : 0;
    out.push({
      kind: "respondError",
      requestId: request.id,
      error,
      queueWaitMs: request.queueWaitMs + waiting,
    });
  }
  finish(state, request, outcome, error.status, out, cacheReport, tokenCounts);
}

/** Sends `request` to `worker`, reserving the slot atomically (C8, C13). */
export function dispatch(
  state: State,
  request: Request,
  worker: Worker,
  out: Effect[],
): void {
  if (request.status.kind === "queued" && dequeue(state, request)) {
    const waitedMs = state.nowMs - request.queuedAtMs;
    request.queueWaitMs += waitedMs;
    state.queueWaitMsAvg = state.queueWaitMsAvg * 0.8 + waitedMs * 0.2;
    markServed(state, request);
  }
  if (request.cacheKey !== null) {
    recordAffinity(
      state,
      request.provider,
      request.model,
      request.cacheKey,
      worker.id,
    );
  }
  request.status = {
    kind: "dispatched",
    workerId: worker.id,
    dispatchedAtMs: state.nowMs,
  };
  // Issue 30: before the slot is taken, so the eviction it may cause sees the worker's other requests only.
  noteDispatched(state, worker, request, out);
  worker.inFlight.add(request.id);
  worker.lastDispatchSeq = ++state.dispatchSeq;
  syncRoute(state, worker);
  out.push({
    kind: "sendToWorker",
    workerId: worker.id,
    message: {
      type: "request",
      request_id: request.id,
      model: request.model,
      endpoint_path: request.endpointPath,
      is_streaming: request.isStreaming,
      body: request.bodyBase64 ? "" : request.body,
      headers: request.headers,
      // The original's newer field (issue 25), in every request frame.
      method: request.method,
      ...(request.bodyBase64 ? { body_base64: request.body } : {}),
    },
  });
  out.push({
    kind: "log",
    level: "debug",
    message: "request dispatched",
    fields: {
      request_id: request.id,
      worker_id: worker.id,
      model: request.model,
    },
  });
}

/** Puts a request (new or requeued) in the queue with its queue deadline (C12, C22). */
export function putInQueue(state: State, request: Request): void {
  // C22: a requeue keeps the original queue time; only the first enqueue starts it.
  request.firstQueuedAtMs ??= state.nowMs;
  const queueDeadline = request.firstQueuedAtMs + state.config.queueTimeoutMs;
  request.status = {
    kind: "queued",
    // A requeue never extends the request's own deadline (C22).
    queueDeadlineAtMs: queueDeadline < request.deadlineAtMs
      ? queueDeadline
      : request.deadlineAtMs,
  };
  request.queuedAtMs = state.nowMs;
  enqueue(state, request);
}

/** Dispatches queued requests while some worker is free for one of them (C10). */
export function pumpQueue(state: State, provider: string, out: Effect[]): void {
  if (state.shuttingDown) return;
  for (;;) {
    const next = nextToDispatch(state, provider);
    if (next === null) return;
    dispatch(state, next.request, next.worker, out);
  }
}

/**
 * Tells the worker to stop a request and keeps its slot reserved until the worker
 * acknowledges or the grace period ends (C44). The request itself is ended by the caller.
 */
export function cancelOnWorker(
  state: State,
  worker: Worker,
  request: Request,
  reason: CancelReason,
  out: Effect[],
): void {
  worker.inFlight.delete(request.id);
  worker.cancelling.set(request.id, state.nowMs + state.config.cancelGraceMs);
  // Same load, but a half-open backend circuit takes its trial only while
  // nothing is in flight (found by the simulator, issue 14).
  syncRoute(state, worker);
  out.push({
    kind: "sendToWorker",
    workerId: worker.id,
    message: { type: "cancel", request_id: request.id, reason },
  });
}

/**
 * A worker lost a request it held (disconnect, heartbeat loss, scoped error):
 * requeue it keeping its place and deadline, unless its stream already reached
 * the client (C24) or it was requeued too often (C23).
 */
export function requeueOrFail(
  state: State,
  worker: Worker,
  request: Request,
  cause: string,
  out: Effect[],
  /** The worker said the request did not start there: prefer another one (issue 14). */
  avoidWorker = false,
): void {
  releaseSlot(state, worker, request.id);
  if (request.status.kind === "streaming") {
    const error = apiError("worker_disconnected", { cause });
    fail(state, request, error, "failed", out);
    return;
  }
  if (state.shuttingDown) {
    const error = shuttingDown(state.config);
    fail(state, request, error, "failed", out);
    return;
  }
  // C22: a request whose client already timed out fails at once, even when the
  // tick that would have noticed has not run yet; requeueing it would hand a dead
  // request to another worker.
  if (state.nowMs >= request.deadlineAtMs) {
    const error = apiError("request_timeout", {});
    fail(state, request, error, "failed", out);
    return;
  }
  if (request.requeueCount >= state.config.requeueCountMax) {
    out.push({
      kind: "log",
      level: "warn",
      message: "requeue exhausted",
      fields: { request_id: request.id, requeues: request.requeueCount },
    });
    const error = apiError("requeue_exhausted", {
      attempts: request.requeueCount + 1,
      cause,
      retryAfterSecs: state.config.retryAfterSecs,
    });
    fail(state, request, error, "failed", out);
    return;
  }
  request.requeueCount++;
  request.avoidWorkerId = avoidWorker ? worker.id : null;
  // Output buffered from the lost worker must not be spliced into the next answer.
  dropBodyPieces(state, request);
  putInQueue(state, request);
  out.push({
    kind: "log",
    level: "info",
    message: "request requeued",
    fields: { request_id: request.id, requeues: request.requeueCount, cause },
  });
}
