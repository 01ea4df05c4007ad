// Builders the worker core's tests share: a fresh worker state, one registered
// with a server that acked some extensions (or none, as the original server
// acks), and frames from the server.
import {
  initialWorkerState,
  step,
  type WorkerEvent,
  type WorkerState,
} from "./mod.ts";

export function fresh(
  over: Partial<Parameters<typeof initialWorkerState>[0]> = {},
): WorkerState {
  return initialWorkerState({
    workerName: "w",
    maxConcurrent: 2,
    models: ["m"],
    modelsDiscovered: false,
    drainTimeoutSecs: 30,
    onServerShutdown: "exit",
    ...over,
  });
}

/** The server's socket closed with `code`: an open one, no reason, jitter 0, unless given. */
export function socketClosed(
  code: number,
  o: { wasOpen?: boolean; reason?: string; random01?: number } = {},
): Extract<WorkerEvent, { kind: "socketClosed" }> {
  return {
    atMs: 0,
    kind: "socketClosed",
    code,
    reason: o.reason ?? "",
    wasOpen: o.wasOpen ?? true,
    random01: o.random01 ?? 0,
  };
}

/** The server's `request` frame: a non-streaming chat of `model` ("m"), headers only when given. */
export function requestFrame(
  requestId: string,
  o: { model?: string; headers?: Record<string, string> } = {},
) {
  return frame({
    type: "request",
    request_id: requestId,
    model: o.model ?? "m",
    endpoint_path: "/v1/chat/completions",
    is_streaming: false,
    body: "{}",
    ...(o.headers === undefined ? {} : { headers: o.headers }),
  });
}

/** The backend answered `requestId` whole: a 200 with `body` and no token counts. */
export function backendFinished(
  requestId: string,
  body = "",
): Extract<WorkerEvent, { kind: "backendFinished" }> {
  return {
    atMs: 0,
    kind: "backendFinished",
    requestId,
    completion: { status_code: 200, headers: {}, body, token_counts: null },
  };
}

export function frame(value: unknown) {
  return {
    atMs: 0,
    kind: "frameReceived" as const,
    text: JSON.stringify(value),
  };
}

/**
 * Registered with a server that acked `extensions` (ours), or with no
 * `extensions` field at all (null: the original server's ack).
 */
export function registeredWith(
  extensions: string[] | null,
  over: Parameters<typeof fresh>[0] = {},
): WorkerState {
  const s = fresh(over);
  step(s, { atMs: 0, kind: "socketOpened" });
  step(
    s,
    frame({
      type: "register_ack",
      worker_id: "w1",
      models: ["m"],
      ...(extensions === null ? {} : { extensions }),
    }),
  );
  return s;
}

/** Registered with the original server (its ack lists no extensions). */
export function registered(
  over: Parameters<typeof fresh>[0] = {},
): WorkerState {
  return registeredWith(null, over);
}

/** Registered with a server that acked `extensions`, with one streaming request (r1, model m) for `endpointPath` on its way. */
export function streamingWith(
  extensions: string[] | null,
  endpointPath: string,
): WorkerState {
  const s = registeredWith(extensions);
  step(
    s,
    frame({
      type: "request",
      request_id: "r1",
      model: "m",
      endpoint_path: endpointPath,
      is_streaming: true,
      body: "{}",
    }),
  );
  return s;
}
