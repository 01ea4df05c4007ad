// A client request (C7-C11, C17, C31, spec 004): refused at once when it cannot
// be served (shutting down, provider disabled, unknown model, tenant over its rate
// limit, queue or tenant share full), else dispatched to the best free worker,
// else queued.
import { apiError, shuttingDown } from "../protocol/errors.ts";
import type { ClientError, Effect } from "../effect.ts";
import { retryAfterSecs } from "../state/backpressure.ts";
import {
  modelQueued,
  queueIsFull,
  queueOf,
  tenantQueueIsFull,
  workerlessModelQueueIsFull,
  workerlessQueueMax,
} from "../state/queue.ts";
import { admitRate, admitRateOf } from "../state/rate_limit.ts";
import {
  admitTokens,
  reserveTokens,
  type TokenVerdict,
} from "../state/token_limit.ts";
import { countsDeltas, NO_TOKEN_ASK, NO_USAGE } from "../state/usage.ts";
import { waitLinesFor, writeWaitLinesOf } from "../state/wait_lines.ts";
import type { KeyRef } from "../config.ts";
import { dispatch, pumpQueue, putInQueue } from "../state/requests.ts";
import { pickWorker } from "../state/routing.ts";
import type { Request, State } from "../state/state.ts";
import {
  hasWorkers,
  modelKnown,
  modelServedRecently,
} from "../state/workers.ts";
import { needOf, servedFor } from "../state/accepts.ts";
import { EXTENSION_BODY_BYTES } from "../protocol/messages.ts";
import { forwardableHeaders } from "../protocol/headers.ts";
import type { Event } from "./event.ts";

type E = Extract<Event, { kind: "requestReceived" }>;

function reject(e: E, error: ClientError, out: Effect[]): void {
  out.push({
    kind: "respondError",
    requestId: e.requestId,
    error,
    queueWaitMs: 0,
  });
  out.push({
    kind: "requestFinished",
    requestId: e.requestId,
    route: e.endpointPath,
    model: e.model,
    tenant: e.tenant ?? "default",
    outcome: "rejected",
    status: error.status,
    durationMs: 0,
    queueWaitMs: 0,
    firstByteMs: null,
    requeues: 0,
    cacheReport: null,
    keyId: e.key?.id ?? null,
    keyName: e.key?.name ?? null,
    modelAsked: e.modelAsked ?? e.model,
    modelServed: e.model,
    workerName: null,
    usage: NO_USAGE,
  });
}

/** 429 for a tenant or key at or over a token limit (issue 26), with when it has room. */
function tokenLimited(e: E, verdict: TokenVerdict, out: Effect[]): void {
  if (verdict.ok) return;
  const error = apiError(verdict.code, {
    who: verdict.who,
    used: verdict.used,
    limit: verdict.limit.tokens,
    per: windowName(verdict.limit.windowMs),
    retryAfterSecs: Math.max(1, Math.ceil(verdict.retryAfterMs / 1000)),
  });
  error.details = {
    limit: verdict.limit.tokens,
    remaining: 0,
    resetInMs: verdict.retryAfterMs,
  };
  out.push({
    kind: "log",
    level: "info",
    message: "token limited",
    fields: { request_id: e.requestId, code: verdict.code, who: verdict.who },
  });
  reject(e, error, out);
}

function windowName(ms: number): string {
  const names: Record<number, string> = {
    1000: "second",
    60_000: "minute",
    3_600_000: "hour",
    86_400_000: "day",
    [30 * 86_400_000]: "30 days",
  };
  return names[ms] ?? `${ms} ms`;
}

/** Why a request cannot be admitted before any limit is counted, or null. */
function refusal(state: State, e: E, provider: string): ClientError | null {
  const retry = state.config.retryAfterSecs;
  if (state.shuttingDown) return shuttingDown(state.config);
  if (
    state.config.providers.find((p) => p.name === provider)?.enabled !== true
  ) {
    return apiError("provider_disabled", { retryAfterSecs: retry });
  }
  // C11: with workers connected, a model none of them acked is unknown; with none
  // connected, the request waits for one (walkthrough 7); a model whose worker
  // left within MODEL_GRACE_SECS waits for its return (issue 24).
  if (!hasWorkers(state, provider)) return null;
  if (!modelKnown(state, provider, e.model)) {
    if (modelServedRecently(state, provider, e.model)) return null;
    return apiError("model_not_found", {
      model: e.model,
      why: "no connected worker serves it",
    });
  }
  // Issue 25: the model's workers must also take the path and carry the body.
  const need = { path: e.endpointPath, binary: e.bodyBase64 === true };
  switch (servedFor(state, provider, e.model, need)) {
    case "ok":
      return null;
    case "path":
      return apiError("model_not_found", {
        model: e.model,
        why:
          `no connected worker serving it accepts ${e.endpointPath} (its ENDPOINT_PREFIXES)`,
      });
    case "body":
      return apiError("binary_body_unsupported", {
        model: e.model,
        path: e.endpointPath,
        extension: EXTENSION_BODY_BYTES,
      });
  }
}

/** 503 queue_full with the spec 004 body fields and a computed Retry-After. */
function queueFull(
  state: State,
  provider: string,
  tenant: string | null,
): ClientError {
  const error = apiError("queue_full", {
    waiting: queueOf(state, provider).length,
    max: tenant === null
      ? state.config.queueLenMax
      : state.config.tenantQueueLenMax,
    tenant,
    retryAfterSecs: retryAfterSecs(state, provider),
  });
  error.details = {
    queueDepth: queueOf(state, provider).length,
    avgWaitMs: Math.round(state.queueWaitMsAvg),
  };
  return error;
}

/** An API key's own request limit (issue 26): false when it refused (429 sent). */
function admitKeyRate(
  state: State,
  key: KeyRef,
  e: E,
  out: Effect[],
): boolean {
  const limit = key.rateLimit!;
  const rate = admitRateOf(state, state.keyRateWindows, key.id, limit);
  if (rate.ok) return true;
  const error = apiError("rate_limit_exceeded", {
    who: `API key ${key.id}`,
    limit: limit.limit,
    per: `requests per ${windowName(limit.windowMs)}`,
    retryAfterSecs: Math.max(1, Math.ceil(rate.retryAfterMs / 1000)),
  });
  error.details = {
    limit: limit.limit,
    remaining: 0,
    resetInMs: rate.retryAfterMs,
  };
  reject(e, error, out);
  return false;
}

export function onRequestReceived(state: State, e: E, out: Effect[]): void {
  if (state.requests.has(e.requestId)) {
    throw new Error(`Request id "${e.requestId}" is already in use`);
  }
  const provider = state.config.defaultProvider;
  const refused = refusal(state, e, provider);
  if (refused !== null) return reject(e, refused, out);
  const tenant = e.tenant ?? "default";
  const key = e.key ?? null;

  // Issue 26: token limits are checked first and count nothing; the request
  // limits below count the admitted one. Issue 33: what the request may use is
  // reserved once it is stored (dispatched or queued), released at its end.
  const ask = e.tokenAsk ?? NO_TOKEN_ASK;
  const reserve = ask.promptEstimate + (ask.maxTokens ?? 0);
  const tokens = admitTokens(state, tenant, key, reserve);
  if (!tokens.ok) return tokenLimited(e, tokens, out);
  if (!admitTenantRate(state, e, tenant, out)) return;
  if (key?.rateLimit != null && !admitKeyRate(state, key, e, out)) return;

  const request = newRequest(state, e, provider, tenant, key);
  // FIFO (C9): while requests for this model wait, a newcomer waits with them and
  // the scheduler (queue.ts) decides the order.
  const worker = modelQueued(state, provider, e.model)
    ? null
    : pickWorker(state, provider, e.model, request.cacheKey, needOf(request));
  if (worker !== null) {
    state.requests.set(request.id, request);
    reserveTokens(state, request, reserve);
    dispatch(state, request, worker, out);
  } else {
    enqueue(state, e, request, reserve, out);
  }
  // Issue 30: its first progress line (queued, or loading) leaves at once.
  if (state.requests.has(request.id)) writeWaitLinesOf(state, request, out);
}

/** Spec 004: the tenant's request limit, checked before queueing; a refused request is not counted. */
function admitTenantRate(
  state: State,
  e: E,
  tenant: string,
  out: Effect[],
): boolean {
  const rate = admitRate(state, tenant);
  if (rate.ok) return true;
  const secs = Math.max(1, Math.ceil(rate.retryAfterMs / 1000));
  const perMin = rate.limit.windowMs === 60_000
    ? "req/min"
    : `req per ${rate.limit.windowMs} ms`;
  const error = apiError("rate_limit_exceeded", {
    who: `Tenant ${tenant}`,
    limit: rate.limit.limit,
    per: perMin,
    retryAfterSecs: secs,
  });
  error.details = {
    limit: rate.limit.limit,
    remaining: 0,
    resetInMs: rate.retryAfterMs,
  };
  out.push({
    kind: "log",
    level: "info",
    message: "rate limited",
    fields: { request_id: e.requestId, tenant },
  });
  reject(e, error, out);
  return false;
}

function newRequest(
  state: State,
  e: E,
  provider: string,
  tenant: string,
  key: Request["key"],
): Request {
  return {
    id: e.requestId,
    provider,
    api: e.api,
    endpointPath: e.endpointPath,
    method: e.method ?? "POST",
    model: e.model,
    isStreaming: e.isStreaming,
    body: e.body,
    bodyBase64: e.bodyBase64 === true,
    headers: forwardableHeaders(e.headers),
    arrivedAtMs: state.nowMs,
    deadlineAtMs: state.nowMs + state.config.requestTimeoutMs,
    enqueueSeq: ++state.enqueueSeq,
    requeueCount: 0,
    queueWaitMs: 0,
    queuedAtMs: state.nowMs,
    // C22: the queue clock starts at arrival, as in the original, where every
    // request passes through the queue; a request dispatched at once and later
    // requeued keeps this deadline (issue 14.8).
    firstQueuedAtMs: state.nowMs,
    avoidWorkerId: null,
    bodyPieces: [],
    bodyBytes: 0,
    tenant,
    priority: e.priority ?? "normal",
    cacheKey: e.cacheKey ?? null,
    status: { kind: "queued", queueDeadlineAtMs: 0 },
    key,
    modelAsked: e.modelAsked ?? e.model,
    deltas: countsDeltas(
        e.endpointPath,
        e.isStreaming,
        e.tokenAsk?.usageAsked === true,
      )
      ? 0
      : null,
    promptEstimate: e.tokenAsk?.promptEstimate ?? 0,
    tokensReserved: 0,
    waitsForLoad: false,
    waitLines: waitLinesFor(state, e.endpointPath, e.isStreaming, e.headers),
  };
}

/** Queues the request, or answers 503 queue_full when its queue (or its tenant's share) is full. */
function enqueue(
  state: State,
  e: E,
  request: Request,
  reserve: number,
  out: Effect[],
): void {
  const { provider, tenant } = request;
  // Issue 33: a model waiting out its grace (workers connected, none serving
  // it) holds at most its share of the queue.
  if (
    hasWorkers(state, provider) && !modelKnown(state, provider, e.model) &&
    workerlessModelQueueIsFull(state, provider, e.model)
  ) {
    out.push({
      kind: "log",
      level: "warn",
      message: "queue full for a model with no worker",
      fields: { request_id: e.requestId, model: e.model, tenant },
    });
    return reject(
      e,
      queueFull(
        state,
        provider,
        `queue full for model "${e.model}": no connected worker serves it and ${
          workerlessQueueMax(state)
        } of its requests already wait for one; retry later`,
      ),
      out,
    );
  }
  if (
    queueIsFull(state, provider) || tenantQueueIsFull(state, provider, tenant)
  ) {
    const global = queueIsFull(state, provider);
    out.push({
      kind: "log",
      level: "warn",
      message: "queue full",
      fields: { request_id: e.requestId, model: e.model, tenant },
    });
    return reject(e, queueFull(state, provider, global ? null : tenant), out);
  }
  state.requests.set(request.id, request);
  reserveTokens(state, request, reserve);
  putInQueue(state, request);
  out.push({
    kind: "log",
    level: "debug",
    message: "request queued",
    fields: { request_id: request.id, model: request.model, tenant },
  });
  pumpQueue(state, provider, out);
}
