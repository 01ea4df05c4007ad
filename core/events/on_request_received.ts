// A client request (C7-C11, C17, C31): refused at once when it cannot be served
// (shutting down, provider disabled, unknown model, queue full), else dispatched
// to the best free worker, else queued.
import type { ClientError, Effect } from "../effect.ts";
import { pickWorker } from "../state/routing.ts";
import { queueIsFull, queueOf } from "../state/queue.ts";
import {
  clientError,
  dispatch,
  forwardableHeaders,
  putInQueue,
} from "../state/requests.ts";
import type { Request, State } from "../state/state.ts";
import { hasWorkers, modelKnown } from "../state/workers.ts";
import type { Event } from "./event.ts";

type E = Extract<Event, { kind: "requestReceived" }>;

function reject(e: E, error: ClientError, out: Effect[]): void {
  out.push({ kind: "respondError", requestId: e.requestId, error });
  out.push({
    kind: "requestFinished",
    requestId: e.requestId,
    model: e.model,
    outcome: "rejected",
    status: error.status,
    durationMs: 0,
    queueWaitMs: 0,
    firstByteMs: null,
    requeues: 0,
  });
}

/** Why a request cannot be admitted, or null. */
function refusal(state: State, e: E, provider: string): ClientError | null {
  const retry = state.config.retryAfterSecs;
  if (state.shuttingDown) {
    return clientError(
      503,
      "shutting_down",
      "server is shutting down; retry shortly",
      retry,
    );
  }
  if (
    state.config.providers.find((p) => p.name === provider)?.enabled !== true
  ) {
    return clientError(
      503,
      "provider_disabled",
      "Provider is currently disabled",
      retry,
    );
  }
  // C11: with workers connected, a model none of them acked is unknown; with none
  // connected, the request waits for one (walkthrough 7).
  if (
    hasWorkers(state, provider) && !modelKnown(state, provider, e.model)
  ) {
    return clientError(
      404,
      "model_not_found",
      `no provider for model "${e.model}": no connected worker serves it (GET /v1/models lists the models available)`,
    );
  }
  return null;
}

export function onRequestReceived(state: State, e: E, out: Effect[]): void {
  if (state.requests.has(e.requestId)) {
    throw new Error(`Request id "${e.requestId}" is already in use`);
  }
  const provider = state.config.defaultProvider;
  const refused = refusal(state, e, provider);
  if (refused !== null) return reject(e, refused, out);

  const request: Request = {
    id: e.requestId,
    provider,
    api: e.api,
    endpointPath: e.endpointPath,
    model: e.model,
    isStreaming: e.isStreaming,
    body: e.body,
    headers: forwardableHeaders(e.headers),
    arrivedAtMs: state.nowMs,
    deadlineAtMs: state.nowMs + state.config.requestTimeoutMs,
    enqueueSeq: ++state.enqueueSeq,
    requeueCount: 0,
    queueWaitMs: 0,
    queuedAtMs: state.nowMs,
    bufferedBody: "",
    status: { kind: "queued", queueDeadlineAtMs: 0 },
  };
  // FIFO (C9): while older requests for this model wait, a new one waits behind them.
  const olderWaiting = queueOf(state, provider).byModel.has(e.model);
  const worker = olderWaiting ? null : pickWorker(state, provider, e.model);
  if (worker !== null) {
    state.requests.set(request.id, request);
    return dispatch(state, request, worker, out);
  }
  if (queueIsFull(state, provider)) {
    out.push({
      kind: "log",
      level: "warn",
      message: "queue full",
      fields: {
        request_id: e.requestId,
        model: e.model,
        queue_len: state.config.queueLenMax,
      },
    });
    const error = clientError(
      503,
      "queue_full",
      `queue full: ${state.config.queueLenMax} requests are already waiting; retry later`,
      state.config.retryAfterSecs,
    );
    return reject(e, error, out);
  }
  state.requests.set(request.id, request);
  putInQueue(state, request);
  out.push({
    kind: "log",
    level: "debug",
    message: "request queued",
    fields: { request_id: request.id, model: request.model },
  });
}
