// The worker's own decisions, pure: what to do on each server message, socket
// close, backend result, signal and timer; its load; its reconnect backoff. The
// I/O part (connection.ts) turns sockets and fetches into these events and runs
// the returned actions in order. `step` updates the state it is given in place.
import { assertNever } from "../assert_never.ts";
import {
  binaryChunkIdFits,
  type CancelReason,
  chunkAsText,
  decodeServerFrame,
  EXTENSION_CAPABILITIES,
  EXTENSION_CHUNK_BYTES,
  PROTOCOL_VERSION_BRIDGE,
  type RequestMessage,
  type ServerMessage,
} from "../protocol/mod.ts";
import {
  asksRetrySoon,
  AUTH_RETRY_MS,
  backoffMs,
  jitterMs,
  RETRY_SOON_MAX_MS,
  SERVER_RESTART_RETRY_MS,
} from "./backoff.ts";
import {
  FRAME_CHARS_MAX,
  IDLE_TIMEOUT_MS,
  REGISTER_ACK_TIMEOUT_MS,
} from "./link_limits.ts";
import {
  onCapabilitiesRead,
  onLifecycleRequest,
  onLifecycleUpdate,
} from "./decide_lifecycle.ts";
import { completionFrames } from "./answers.ts";
import {
  onCapabilitiesDue,
  onModelsRefreshDue,
  periodicTimers,
} from "./periodic.ts";
import {
  noteServed,
  onResidencyDue,
  onResidencyRead,
  probeResidency,
} from "./residency.ts";
import { holdForLoad, needsLoad, onAutoLoadDone } from "./auto_load.ts";
import { streamHeadActions } from "./stream_head.ts";
import {
  advertised,
  log,
  modelsUpdate,
  notAnsweredMessage,
  send,
} from "./worker_actions.ts";
import {
  type Completion,
  type WorkerAction,
  type WorkerEvent,
  type WorkerState,
} from "./worker_state.ts";

export function step(state: WorkerState, event: WorkerEvent): WorkerAction[] {
  switch (event.kind) {
    case "socketOpened":
      return onSocketOpened(state);
    case "frameReceived":
      return onFrame(state, event.text);
    case "socketClosed":
      return onSocketClosed(state, event);
    case "chunkRead":
      // Hot path: one lookup; nothing after a cancel or a disconnect.
      if (!state.inFlight.has(event.requestId)) return [];
      return [chunkAction(state, event.requestId, event.chunk)];
    case "headRead":
      return streamHeadActions(
        state,
        event.requestId,
        event.status,
        event.headers,
      );
    case "backendFinished":
      return onBackendFinished(state, event.requestId, event.completion);
    case "backendUnavailable":
      return onBackendFailure(
        state,
        event.requestId,
        event.message,
        "backend_unavailable",
      );
    case "backendStreamBroken":
      return onBackendFailure(
        state,
        event.requestId,
        event.message,
        "backend_stream_broken",
      );
    case "modelsListed":
      return onModelsListed(state, event.models, event.reply);
    case "modelsListFailed":
      return onModelsListFailed(state, event.message, event.reply);
    case "modelsRefreshDue":
      return onModelsRefreshDue(state);
    case "shutdownSignalled":
      return onShutdownSignalled(state);
    case "drainTimerFired":
      return onDrainTimerFired(state);
    case "reconnectTimerFired":
      return state.connected || state.connecting ? [] : connectActions(state);
    case "handshakeTimerFired":
      return onHandshakeTimerFired(state);
    case "idleTimerFired":
      return state.connected
        ? [
          log("warn", "no frame from the proxy for 90 s: reconnecting", {
            idle_ms: IDLE_TIMEOUT_MS,
          }),
          { kind: "dropSocket" },
        ]
        : [];
    case "capabilitiesDue":
      return onCapabilitiesDue(state);
    case "capabilitiesRead":
      return onCapabilitiesRead(state, event.capabilities);
    case "residencyDue":
      return onResidencyDue(state);
    case "residencyRead":
      return onResidencyRead(state, event.residency);
    case "autoLoadDone":
      return onAutoLoadDone(
        state,
        event.model,
        event.error,
        (requestId, message) =>
          onBackendFailure(state, requestId, message, "backend_unavailable"),
      );
    case "lifecycleUpdate":
      return onLifecycleUpdate(state, event);
    default:
      return assertNever(event);
  }
}

/** What a starting worker does: arm its periodic timers, then dial the proxy. */
export function startActions(state: WorkerState): WorkerAction[] {
  return [...periodicTimers(state), ...connectActions(state)];
}

/**
 * Dial the proxy, and give the attempt REGISTER_ACK_TIMEOUT_MS to end in a
 * `register_ack` (the first connect at start goes through here too).
 */
export function connectActions(state: WorkerState): WorkerAction[] {
  state.connecting = true;
  return [
    { kind: "connect" },
    { kind: "armTimer", timer: "handshake", ms: REGISTER_ACK_TIMEOUT_MS },
  ];
}

/**
 * No `register_ack` in time (issue 23): the proxy took the connection and
 * never answered. The socket is cut, whether still dialling or open; its close
 * event takes the usual reconnect path. A timer left from an attempt that
 * already closed (or registered) finds nothing to do.
 */
function onHandshakeTimerFired(state: WorkerState): WorkerAction[] {
  if (state.registered || !(state.connecting || state.connected)) return [];
  return [
    log("warn", "no register_ack from the proxy in time: reconnecting", {
      timeout_ms: REGISTER_ACK_TIMEOUT_MS,
      socket_open: state.connected ? "yes" : "no",
    }),
    { kind: "dropSocket" },
  ];
}

/**
 * A streamed chunk's frame: binary (chunk-bytes-v1) when the server acked the
 * extension and the read came as bytes, else a `response_chunk` text frame,
 * what an original server always gets. Bytes without the extension (a stream
 * outliving a reconnect; never in practice) are decoded into text.
 */
function chunkAction(
  state: WorkerState,
  requestId: string,
  chunk: string | Uint8Array,
): WorkerAction {
  if (typeof chunk !== "string") {
    if (
      state.extensions.includes(EXTENSION_CHUNK_BYTES) &&
      binaryChunkIdFits(requestId)
    ) return { kind: "sendChunkBytes", requestId, chunk };
    chunk = chunkAsText(chunk);
  }
  return send({ type: "response_chunk", request_id: requestId, chunk });
}

function onSocketOpened(state: WorkerState): WorkerAction[] {
  state.connected = true;
  state.connecting = false;
  return [
    log("info", "connected to proxy"),
    { kind: "armTimer", timer: "idle", ms: IDLE_TIMEOUT_MS },
    send({
      type: "register",
      worker_name: state.workerName,
      models: advertised(state),
      max_concurrent: state.maxConcurrent,
      protocol_version: PROTOCOL_VERSION_BRIDGE,
      current_load: state.inFlight.size,
      // An original-style worker (the simulator's) sends no field at all.
      ...(state.speaks === null ? {} : { extensions: [...state.speaks] }),
      // The original's field (issue 25); absent when the worker serves every path.
      ...(state.endpointPrefixes.length === 0
        ? {}
        : { endpoint_prefixes: [...state.endpointPrefixes] }),
    }),
  ];
}

function onFrame(state: WorkerState, text: string): WorkerAction[] {
  // Any frame proves the link is alive.
  const alive: WorkerAction = {
    kind: "armTimer",
    timer: "idle",
    ms: IDLE_TIMEOUT_MS,
  };
  const decoded = decodeServerFrame(text, FRAME_CHARS_MAX);
  if (!decoded.ok) {
    return [
      alive,
      log("warn", "ignored an invalid frame from the proxy", {
        reason: decoded.error.message,
      }),
    ];
  }
  // Pushed, not spread into a new array (issue 31: one a frame).
  const out: WorkerAction[] = [alive];
  for (const a of onServerMessage(state, decoded.message)) out.push(a);
  return out;
}

function onServerMessage(state: WorkerState, m: ServerMessage): WorkerAction[] {
  switch (m.type) {
    case "register_ack": {
      state.registered = true;
      state.failedAttempts = 0;
      // Extension frames only to a server that listed the extension (issue 9).
      state.extensions = (state.speaks ?? []).filter((x) =>
        m.extensions?.includes(x) === true
      );
      const out: WorkerAction[] = [log("info", "registered", {
        worker_id: m.worker_id,
        models: m.models.join(","),
        protocol_version: m.protocol_version ?? "(none)",
        extensions: state.extensions.join(",") || "(none)",
      })];
      for (const w of m.warnings ?? []) {
        out.push(log("warn", "proxy warning", { warning: w }));
      }
      state.capabilitiesSent = null;
      if (state.extensions.includes(EXTENSION_CAPABILITIES)) {
        out.push({ kind: "probeCapabilities" });
      }
      state.residencySent = null;
      out.push(...probeResidency(state));
      return out;
    }
    case "request":
      return onRequest(state, m);
    case "cancel":
      return onCancel(state, m.request_id, m.reason);
    case "ping":
      return [send({
        type: "pong",
        current_load: state.inFlight.size,
        // Echoed so the proxy can measure round trips; absent stays absent (C40).
        ...(m.timestamp_unix_ms == null
          ? {}
          : { timestamp_unix_ms: m.timestamp_unix_ms }),
      })];
    case "graceful_shutdown":
      return onServerShutdown(
        state,
        m.reason ?? "",
        m.drain_timeout_secs ?? null,
      );
    case "models_refresh":
      if (state.modelsDiscovered) return [{ kind: "listModels", reply: true }];
      return [modelsUpdate(state)];
    case "lifecycle_request":
      return onLifecycleRequest(state, m);
    default:
      return assertNever(m);
  }
}

function onRequest(state: WorkerState, r: RequestMessage): WorkerAction[] {
  if (state.drain.kind !== "none") {
    return [
      log("warn", "refused request while draining", {
        request_id: r.request_id,
      }),
      send(
        notAnsweredMessage(
          state,
          r.request_id,
          r.endpoint_path,
          "worker_draining",
          "worker is shutting down and takes no new requests",
        ),
      ),
    ];
  }
  if (state.inFlight.has(r.request_id)) {
    return [
      log("warn", "ignored a duplicate request id", {
        request_id: r.request_id,
      }),
    ];
  }
  state.inFlight.set(r.request_id, r.endpoint_path);
  state.inFlightModels.set(r.request_id, r.model);
  // Issue 30: a model the backend must be asked to load is loaded first.
  if (needsLoad(state, r.model)) return holdForLoad(state, r);
  // Debug, not info (issue 10): a line per request was a synchronous stdout
  // write on every request, measured in the worker's profile; and not built
  // at all unless kept (issue 31).
  const forward: WorkerAction = { kind: "forward", request: r };
  if (!state.logsDebug) return [forward];
  return [
    log("debug", "forwarding request", {
      request_id: r.request_id,
      model: r.model,
      endpoint: r.endpoint_path,
      stream: r.is_streaming,
      load: state.inFlight.size,
    }),
    forward,
  ];
}

function reasonText(reason: CancelReason): string {
  return typeof reason === "string" ? reason : reason.other;
}

function onCancel(
  state: WorkerState,
  requestId: string,
  reason: CancelReason,
): WorkerAction[] {
  state.inFlightModels.delete(requestId);
  if (!state.inFlight.delete(requestId)) {
    return [
      log("debug", "cancel for a request not in flight", {
        request_id: requestId,
      }),
    ];
  }
  // 499 at once frees the proxy's slot (C44); not `error`, which the original
  // server answers by closing the socket.
  return [
    { kind: "abortBackend", requestId },
    log("info", "cancelled", {
      request_id: requestId,
      reason: reasonText(reason),
    }),
    send({
      type: "response_complete",
      request_id: requestId,
      status_code: 499,
      body: "",
    }),
    ...finishDrainIfIdle(state),
  ];
}

function onBackendFinished(
  state: WorkerState,
  requestId: string,
  c: Completion,
): WorkerAction[] {
  const endpointPath = state.inFlight.get(requestId);
  if (endpointPath === undefined) return []; // Cancelled or disconnected meanwhile.
  state.inFlight.delete(requestId);
  const model = state.inFlightModels.get(requestId);
  state.inFlightModels.delete(requestId);
  // Issue 30: an answer says the backend held its model; its residency may have changed.
  if (model !== undefined && c.status_code < 400) noteServed(state, model);
  const out: WorkerAction[] = [];
  if (c.status_code >= 400) {
    out.push(
      log("warn", "backend error", {
        request_id: requestId,
        status: c.status_code,
      }),
    );
  }
  for (const m of completionFrames(state, requestId, endpointPath, c)) {
    out.push(send(m));
  }
  out.push(...probeResidency(state));
  out.push(...finishDrainIfIdle(state));
  return out;
}

/**
 * The backend gave no complete answer (issue 14): refused or reset before any
 * byte (`backend_unavailable`: it did not start here), or died after part of
 * the answer went out (`backend_stream_broken`: our server ends the client's
 * stream with an SSE error). The original server gets the 502 it always got.
 */
function onBackendFailure(
  state: WorkerState,
  requestId: string,
  message: string,
  why: "backend_unavailable" | "backend_stream_broken",
): WorkerAction[] {
  const endpointPath = state.inFlight.get(requestId);
  if (endpointPath === undefined) return [];
  state.inFlight.delete(requestId);
  state.inFlightModels.delete(requestId);
  return [
    log(
      "warn",
      why === "backend_unavailable"
        ? "backend unavailable"
        : "backend stream broken",
      { request_id: requestId, reason: message },
    ),
    send(notAnsweredMessage(state, requestId, endpointPath, why, message)),
    ...finishDrainIfIdle(state),
  ];
}

/** A signal drain ends when the last in-flight request has been answered. */
function finishDrainIfIdle(state: WorkerState): WorkerAction[] {
  if (state.drain.kind !== "signal" || state.inFlight.size > 0) return [];
  return [
    log("info", "drained, closing"),
    { kind: "closeSocket", code: 1000, reason: "worker shutting down" },
    { kind: "exit", code: 0, graceful: true },
  ];
}

function abortAll(state: WorkerState): WorkerAction[] {
  const out: WorkerAction[] = [];
  for (const requestId of state.inFlight.keys()) {
    out.push({ kind: "abortBackend", requestId });
  }
  state.inFlight.clear();
  state.inFlightModels.clear();
  return out;
}

function onShutdownSignalled(state: WorkerState): WorkerAction[] {
  if (state.drain.kind === "signal") {
    return [log("warn", "second signal, exiting now"), ...abortAll(state), {
      kind: "exit",
      code: 1,
      graceful: false,
    }];
  }
  state.drain = { kind: "signal" };
  const out: WorkerAction[] = [
    log("info", "graceful shutdown", {
      in_flight: state.inFlight.size,
      source: "signal",
    }),
  ];
  // drain-v1: the same models with `draining: true`, so they queue instead of
  // answering 404 (issue 14); an original server gets an empty model list,
  // which stops its routing here too (it has no worker-initiated drain message).
  if (state.registered) out.push(modelsUpdate(state));
  if (state.inFlight.size === 0) return [...out, ...finishDrainIfIdle(state)];
  out.push({ kind: "armTimer", timer: "drain", ms: state.drainTimeoutMs });
  return out;
}

function onServerShutdown(
  state: WorkerState,
  reason: string,
  drainTimeoutSecs: number | null,
): WorkerAction[] {
  if (state.drain.kind !== "none") return [];
  state.drain = { kind: "server" };
  const ms = drainTimeoutSecs === null
    ? state.drainTimeoutMs
    : drainTimeoutSecs * 1000;
  return [
    log("info", "graceful shutdown", {
      in_flight: state.inFlight.size,
      source: "proxy",
      reason,
    }),
    { kind: "armTimer", timer: "drain", ms },
  ];
}

function onDrainTimerFired(state: WorkerState): WorkerAction[] {
  if (state.drain.kind === "none") return [];
  const abandoned = state.inFlight.size;
  const out: WorkerAction[] = [
    log("warn", "drain timeout, abandoning in-flight requests", {
      in_flight: abandoned,
    }),
    ...abortAll(state),
    { kind: "closeSocket", code: 1000, reason: "drain timeout" },
  ];
  // A signal drain exits now; a proxy drain continues in onSocketClosed.
  if (state.drain.kind === "signal") {
    out.push({ kind: "exit", code: 0, graceful: true });
  }
  return out;
}

function onSocketClosed(
  state: WorkerState,
  e: Extract<WorkerEvent, { kind: "socketClosed" }>,
): WorkerAction[] {
  state.connected = false;
  state.connecting = false;
  state.registered = false;
  state.extensions = [];
  state.capabilitiesSent = null;
  // The proxy requeues or fails what this connection held; answers sent on a
  // later connection would name ids it no longer assigns to us.
  const out = abortAll(state);
  const fields = { code: e.code, reason: e.reason };
  switch (state.drain.kind) {
    case "signal":
      return [...out, log("info", "disconnected during shutdown", fields), {
        kind: "exit",
        code: 0,
        graceful: true,
      }];
    case "server":
      if (state.onServerShutdown === "exit") {
        return [
          ...out,
          log("info", "proxy closed after graceful shutdown, exiting", fields),
          {
            kind: "exit",
            code: 0,
            graceful: true,
          },
        ];
      }
      state.drain = { kind: "none" };
      state.failedAttempts = 0;
      return [
        ...out,
        log(
          "info",
          "proxy closed after graceful shutdown, reconnecting",
          fields,
        ),
        {
          kind: "armTimer",
          timer: "reconnect",
          ms: SERVER_RESTART_RETRY_MS + jitterMs(e.random01),
        },
      ];
    case "none":
      break;
    default:
      return assertNever(state.drain);
  }
  if (e.code === 1008) {
    const ms = AUTH_RETRY_MS + jitterMs(e.random01);
    state.failedAttempts++;
    return [
      ...out,
      log(
        "error",
        "proxy rejected this worker; check WORKER_SECRET and PROVIDER_NAME",
        {
          ...fields,
          retry_in_ms: ms,
        },
      ),
      { kind: "armTimer", timer: "reconnect", ms },
    ];
  }
  // 1012/1013: the proxy asks to be retried soon; the pace stays short.
  const ms = asksRetrySoon(e.code)
    ? Math.min(backoffMs(state.failedAttempts, e.random01), RETRY_SOON_MAX_MS)
    : backoffMs(state.failedAttempts, e.random01);
  state.failedAttempts++;
  const message = e.wasOpen
    ? "disconnected from proxy, reconnecting"
    : "could not connect to proxy, retrying";
  return [...out, log("warn", message, { ...fields, retry_in_ms: ms }), {
    kind: "armTimer",
    timer: "reconnect",
    ms,
  }];
}

function sameModels(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((m, i) => m === b[i]);
}

function onModelsListed(
  state: WorkerState,
  models: string[],
  reply: boolean,
): WorkerAction[] {
  const changed = !sameModels(state.models, models);
  state.models = [...models];
  const out: WorkerAction[] = [];
  if (changed) {
    out.push(
      log("info", "backend models changed", { models: models.join(",") }),
    );
  }
  // While draining the advertised list stays empty: nothing to announce.
  if ((changed || reply) && state.registered && state.drain.kind === "none") {
    out.push(modelsUpdate(state));
  }
  return out;
}

function onModelsListFailed(
  state: WorkerState,
  message: string,
  reply: boolean,
): WorkerAction[] {
  const out: WorkerAction[] = [
    log("warn", "backend error: could not list models", { reason: message }),
  ];
  // A refresh asked by the proxy still gets an answer: the last known list.
  if (reply && state.registered) out.push(modelsUpdate(state));
  return out;
}
