// Small builders for the actions decide.ts returns.
import { EXTENSION_DRAIN, type WorkerMessage } from "../protocol/mod.ts";
import { errorBody, serverUnderstandsScopedErrors } from "./answers.ts";
import type { LogFields, LogLevel } from "../log.ts";
import type { WorkerAction, WorkerState } from "./worker_state.ts";

export function log(
  level: LogLevel,
  message: string,
  fields: LogFields = {},
): WorkerAction {
  return { kind: "log", level, message, fields };
}

export function send(message: WorkerMessage): WorkerAction {
  return { kind: "send", message };
}

/** Whether the server takes `draining: true` (drain-v1) instead of an empty model list. */
function drainSignalled(state: WorkerState): boolean {
  return state.drain.kind !== "none" &&
    state.extensions.includes(EXTENSION_DRAIN);
}

/**
 * Models as advertised: while draining, none for a server without drain-v1 (so
 * it routes nothing new here); with drain-v1 the list stays and `draining: true`
 * says it, so the models queue instead of answering 404 (issue 14).
 */
export function advertised(state: WorkerState): string[] {
  return state.drain.kind === "none" || drainSignalled(state)
    ? state.models
    : [];
}

/**
 * A request that reached a draining worker did not start: our server gets a
 * scoped `worker_draining` error and requeues it elsewhere at once (issue 14);
 * the original server, which closes the socket on any `error`, gets a 503.
 */
export function drainingError(
  state: WorkerState,
  requestId: string,
  endpointPath: string,
): WorkerMessage {
  const message = "worker is shutting down and takes no new requests";
  if (serverUnderstandsScopedErrors(state)) {
    return {
      type: "error",
      request_id: requestId,
      code: "worker_draining",
      message,
    };
  }
  const body = endpointPath.startsWith("/v1/messages")
    ? { type: "error", error: { type: "overloaded_error", message } }
    : { error: { message, type: "worker_draining", code: "worker_draining" } };
  return {
    type: "response_complete",
    request_id: requestId,
    status_code: 503,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  };
}

/** The backend refused the request before any byte: a scoped error for our server, else its 502. */
export function unavailableAnswer(
  state: WorkerState,
  requestId: string,
  endpointPath: string | null,
  message: string,
): WorkerMessage {
  if (serverUnderstandsScopedErrors(state)) {
    return {
      type: "error",
      request_id: requestId,
      code: "backend_unavailable",
      message,
    };
  }
  return {
    type: "response_complete",
    request_id: requestId,
    status_code: 502,
    headers: { "content-type": "application/json" },
    body: errorBody(endpointPath, "backend_unreachable", message),
  };
}

/** The backend broke mid-answer: a scoped error for our server, else its 502. */
export function streamBrokenAnswer(
  state: WorkerState,
  requestId: string,
  endpointPath: string | null,
  message: string,
): WorkerMessage {
  if (serverUnderstandsScopedErrors(state)) {
    return {
      type: "error",
      request_id: requestId,
      code: "backend_stream_broken",
      message,
    };
  }
  return {
    type: "response_complete",
    request_id: requestId,
    status_code: 502,
    headers: { "content-type": "application/json" },
    body: errorBody(endpointPath, "backend_error", message),
  };
}

export function modelsUpdate(state: WorkerState): WorkerAction {
  return send({
    type: "models_update",
    models: advertised(state),
    current_load: state.inFlight.size,
    ...(drainSignalled(state) ? { draining: true } : {}),
  });
}
