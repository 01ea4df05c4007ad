// Small builders for the actions decide.ts returns.
import type { WorkerMessage } from "../protocol/mod.ts";
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

/** Models as advertised: none while draining, so the proxy routes nothing new here. */
export function advertised(state: WorkerState): string[] {
  return state.drain.kind === "none" ? state.models : [];
}

export function drainingError(
  requestId: string,
  endpointPath: string,
): WorkerMessage {
  const message = "worker is shutting down and takes no new requests";
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

export function modelsUpdate(state: WorkerState): WorkerAction {
  return send({
    type: "models_update",
    models: advertised(state),
    current_load: state.inFlight.size,
  });
}
