// Small builders for the actions decide.ts returns.
import {
  apiError,
  type ErrorCode,
  errorShapeOf,
  EXTENSION_DRAIN,
  routeErrorBody,
  type WorkerMessage,
} from "../protocol/mod.ts";
import { serverUnderstandsScopedErrors } from "./answers.ts";
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
 * Why a request ends on this worker without a backend answer, and what an
 * original server (which closes the socket on any `error`) gets instead of the
 * scoped error our server reads as "retry elsewhere" or "end the stream" (issue 14).
 */
const NOT_ANSWERED = {
  /** It reached a draining worker: it did not start here. */
  worker_draining: "worker_draining",
  /** The backend refused or reset it before any byte: it did not start here. */
  backend_unavailable: "backend_unreachable",
  /** The backend broke after part of the answer went out. */
  backend_stream_broken: "backend_error",
} as const satisfies Record<string, ErrorCode>;

export type NotAnswered = keyof typeof NOT_ANSWERED;

/** A scoped error for our server, else the status and body the original always got. */
export function notAnsweredMessage(
  state: WorkerState,
  requestId: string,
  endpointPath: string | null,
  why: NotAnswered,
  message: string,
): WorkerMessage {
  if (serverUnderstandsScopedErrors(state)) {
    return { type: "error", request_id: requestId, code: why, message };
  }
  const error = apiError(NOT_ANSWERED[why], { detail: message });
  return {
    type: "response_complete",
    request_id: requestId,
    status_code: error.status,
    headers: { "content-type": "application/json" },
    body: routeErrorBody(errorShapeOf(endpointPath), error),
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
