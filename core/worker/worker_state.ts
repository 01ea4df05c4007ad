// The worker's state, the events its I/O part feeds in, and the actions it gets
// back: the vocabulary of decide.ts.
import {
  type LifecycleOperation,
  type LifecycleProgressStatus,
  type LifecycleRequestMessage,
  PROTOCOL_FRAME_MAX,
  type RequestMessage,
  type RunnerCapabilities,
  SUPPORTED_EXTENSIONS,
  type TokenCounts,
  type WorkerMessage,
} from "../protocol/mod.ts";
import type { LogFields, LogLevel } from "../log.ts";

export type Drain =
  | { kind: "none" }
  /** SIGTERM/SIGINT: finish in-flight work, close, exit. */
  | { kind: "signal" }
  /** The proxy sent graceful_shutdown: finish in-flight work, the proxy closes. */
  | { kind: "server" };

export type WorkerState = {
  workerName: string;
  maxConcurrent: number;
  modelsDiscovered: boolean;
  /** MODELS_REFRESH_SECS in ms: how often discovered models are listed again; 0: never. */
  modelsRefreshMs: number;
  models: string[];
  drainTimeoutMs: number;
  onServerShutdown: "exit" | "reconnect";
  connected: boolean;
  /** A connect attempt is under way: dialled, not yet closed. */
  connecting: boolean;
  registered: boolean;
  /** Requests being forwarded, with their endpoint path; its size is the load reported to the proxy. */
  inFlight: Map<string, string>;
  /** Largest frame the server accepts (its frame limit), in UTF-8 bytes; longer answers are split or refused. */
  responseFrameBytesMax: number;
  drain: Drain;
  failedAttempts: number;
  /**
   * Extensions this worker speaks, listed in register; null: no field at all
   * (how the original worker registers; the simulator runs such workers too).
   */
  speaks: readonly string[] | null;
  /** Extensions the server listed in register_ack (and we speak); empty = original server. */
  extensions: string[];
  /** JSON of the capabilities last sent on this connection (change detection). */
  capabilitiesSent: string | null;
  /** Lifecycle tasks being carried to the backend: task id -> operation and model. */
  lifecycle: Map<string, { operation: LifecycleOperation; modelId: string }>;
  /** ENDPOINT_PREFIXES (issue 25), sent in register when not empty; empty = every path. */
  endpointPrefixes: string[];
  /** MAX_RESIDENT_MODELS (issue 30): models the backend holds at once; null = what it reports. */
  maxResidentModels: number | null;
  /** Models of answers sent, most recent first (residency where the backend says nothing). */
  served: string[];
  /** Requests being forwarded -> their model (what an answer says the backend held). */
  inFlightModels: Map<string, string>;
  /** JSON of the residency last sent on this connection (change detection). */
  residencySent: string | null;
  /**
   * A backend residency read under way; `again`: one more is wanted after
   * it; `due`: that one waits for the residency timer (RESIDENCY_GAP_MS).
   */
  residencyProbe: "idle" | "running" | "again" | "due";
  /** AUTO_LOAD (issue 30): load a model the backend must be asked to load before its request. */
  autoLoad: boolean;
  /** The backend's last residency read (auto_load.ts decides from it); null until one. */
  backendHolds: BackendResidency | null;
  /** Loads the worker runs for its requests: model -> the requests waiting for it. */
  autoLoads: Map<string, RequestMessage[]>;
  /**
   * Whether debug lines are kept (LOG_LEVEL debug or trace): the per-request
   * ones are not built otherwise (issue 31: their fields were an object and an
   * action per request that the logger then dropped).
   */
  logsDebug: boolean;
};

/**
 * What the backend says it holds (issue 30), as the shell read it; `loaded`
 * null when it says nothing (a plain OpenAI-compatible server).
 */
export type BackendResidency = {
  loaded: string[] | null;
  loading: string[];
  /** How many models it holds at once, when it says. */
  room: number | null;
  /** It loads models on demand and unloads others for them (Ollama, llama-swap, a router, spec 004). */
  swaps: boolean;
  /**
   * Issue 30: it must be asked to load a model before serving it (a
   * llama-server router started with --no-models-autoload, a spec 004
   * runner); absent = no.
   */
  explicitLoad?: boolean;
};

/**
 * What our worker speaks, listed in register (an added field the original
 * server ignores): every extension our server speaks, one list for both.
 */
export const WORKER_EXTENSIONS: readonly string[] = SUPPORTED_EXTENSIONS;

/** The frame limit, in bytes: the protocol's (our server counts the same number in characters, which a byte-fit frame never exceeds). */
export const WORKER_FRAME_BYTES_MAX = PROTOCOL_FRAME_MAX;

/**
 * An event as the core steps it: what happened (`WorkerInput`) and when (issue
 * 27), as on the server — the shell stamps `atMs` from its monotonic clock, the
 * simulator's virtual worker from virtual time. Timing decisions (the periodic
 * capabilities probe, the models refresh) read it instead of a clock.
 */
export type WorkerEvent = WorkerInput & { atMs: number };

/** What happened to the worker, before the shell stamps its time. */
export type WorkerInput =
  | { kind: "socketOpened" }
  | { kind: "frameReceived"; text: string }
  | {
    kind: "socketClosed";
    code: number;
    reason: string;
    wasOpen: boolean;
    random01: number;
  }
  /**
   * A streamed read from the backend: text, or with chunk-bytes-v1 negotiated
   * its bytes, whole UTF-8 characters (the shell holds a split one back, C45).
   */
  | { kind: "chunkRead"; requestId: string; chunk: string | Uint8Array }
  /**
   * A streamed answer's head (stream-head-v1, issue 25): read before its
   * first chunk; the backend's headers, hop-by-hop ones dropped.
   */
  | {
    kind: "headRead";
    requestId: string;
    status: number;
    headers: Record<string, string>;
  }
  | { kind: "backendFinished"; requestId: string; completion: Completion }
  /**
   * The backend refused or reset the connection before any response byte
   * (issue 14): the request did not start here.
   */
  | { kind: "backendUnavailable"; requestId: string; message: string }
  /**
   * The backend's connection broke after part of the answer went to the proxy
   * (issue 14): the request started here and cannot be retried.
   */
  | { kind: "backendStreamBroken"; requestId: string; message: string }
  | { kind: "modelsListed"; models: string[]; reply: boolean }
  | { kind: "modelsListFailed"; message: string; reply: boolean }
  /** The `modelsRefresh` timer fired (every MODELS_REFRESH_SECS). */
  | { kind: "modelsRefreshDue" }
  | { kind: "shutdownSignalled" }
  | { kind: "drainTimerFired" }
  | { kind: "reconnectTimerFired" }
  /** REGISTER_ACK_TIMEOUT_MS after a connect attempt began. */
  | { kind: "handshakeTimerFired" }
  /** No frame from the proxy for IDLE_TIMEOUT_MS: the link is presumed dead. */
  | { kind: "idleTimerFired" }
  /** The `capabilities` timer fired (every 5 s): look at the backend's capabilities again. */
  | { kind: "capabilitiesDue" }
  | { kind: "capabilitiesRead"; capabilities: RunnerCapabilities }
  /** The `residency` timer fired (every 5 s, residency-v1 only). */
  | { kind: "residencyDue" }
  /** The shell's read of the backend's residency (null: the read failed). */
  | { kind: "residencyRead"; residency: BackendResidency | null }
  /** Issue 30: an AUTO_LOAD load (and its unload first) ended; error null = loaded. */
  | { kind: "autoLoadDone"; model: string; error: string | null }
  /** The lifecycle adapter's report on a task. */
  | {
    kind: "lifecycleUpdate";
    taskId: string;
    status: LifecycleProgressStatus;
    progress: number | null;
    error: string | null;
    result: Record<string, unknown> | null;
  };

export type Completion = {
  status_code: number;
  headers: Record<string, string>;
  body: string;
  token_counts: TokenCounts | null;
  /** body-bytes-v1 (issue 25): an answer that is not text, base64 (then `body` is ""). */
  body_base64?: string;
};

export type TimerName =
  | "reconnect"
  | "drain"
  | "idle"
  | "handshake"
  /** Periodic, re-armed each time it fires (core/worker/periodic.ts). */
  | "capabilities"
  /** Periodic, armed only for discovered models with a refresh interval. */
  | "modelsRefresh"
  /** Periodic, armed only by a worker that speaks residency-v1 (issue 30). */
  | "residency";

export type WorkerAction =
  | { kind: "connect" }
  | { kind: "send"; message: WorkerMessage }
  /** A chunk-bytes-v1 binary frame (core/protocol/binary.ts) carrying `chunk`. */
  | { kind: "sendChunkBytes"; requestId: string; chunk: Uint8Array }
  | { kind: "forward"; request: RequestMessage }
  | { kind: "abortBackend"; requestId: string }
  | { kind: "listModels"; reply: boolean }
  | { kind: "probeCapabilities" }
  /** Read the backend's residency; a `residencyRead` follows. */
  | { kind: "probeResidency" }
  /** Issue 30 (AUTO_LOAD): unload `evict` when not null, then load `model`; answered by autoLoadDone. */
  | { kind: "autoLoad"; model: string; evict: string | null }
  | { kind: "runLifecycle"; request: LifecycleRequestMessage }
  | { kind: "armTimer"; timer: TimerName; ms: number }
  | { kind: "closeSocket"; code: number; reason: string }
  /** Cut the socket without a close handshake (a dead peer would never answer). */
  | { kind: "dropSocket" }
  | { kind: "exit"; code: number; graceful: boolean }
  | { kind: "log"; level: LogLevel; message: string; fields: LogFields };

export function initialWorkerState(opts: {
  workerName: string;
  maxConcurrent: number;
  models: string[];
  modelsDiscovered: boolean;
  /** MODELS_REFRESH_SECS; absent or 0: discovered models are not listed again. */
  modelsRefreshSecs?: number;
  drainTimeoutSecs: number;
  onServerShutdown: "exit" | "reconnect";
  /** The server's frame limit; absent: our server's default. */
  responseFrameBytesMax?: number;
  /** Extensions to speak; absent: WORKER_EXTENSIONS. */
  speaks?: readonly string[] | null;
  /** ENDPOINT_PREFIXES; absent: every path. */
  endpointPrefixes?: readonly string[];
  /** MAX_RESIDENT_MODELS; absent or null: what the backend reports. */
  maxResidentModels?: number | null;
  /** AUTO_LOAD; absent: off. */
  autoLoad?: boolean;
  /** Whether debug lines are wanted; absent: yes (the simulator and tests keep them). */
  logsDebug?: boolean;
}): WorkerState {
  return {
    workerName: opts.workerName,
    maxConcurrent: opts.maxConcurrent,
    modelsDiscovered: opts.modelsDiscovered,
    modelsRefreshMs: (opts.modelsRefreshSecs ?? 0) * 1000,
    models: [...opts.models],
    drainTimeoutMs: opts.drainTimeoutSecs * 1000,
    onServerShutdown: opts.onServerShutdown,
    connected: false,
    connecting: false,
    registered: false,
    speaks: opts.speaks === undefined ? WORKER_EXTENSIONS : opts.speaks,
    inFlight: new Map(),
    responseFrameBytesMax: opts.responseFrameBytesMax ??
      WORKER_FRAME_BYTES_MAX,
    drain: { kind: "none" },
    failedAttempts: 0,
    extensions: [],
    capabilitiesSent: null,
    lifecycle: new Map(),
    endpointPrefixes: [...(opts.endpointPrefixes ?? [])],
    maxResidentModels: opts.maxResidentModels ?? null,
    served: [],
    inFlightModels: new Map(),
    residencySent: null,
    residencyProbe: "idle",
    autoLoad: opts.autoLoad ?? false,
    backendHolds: null,
    autoLoads: new Map(),
    logsDebug: opts.logsDebug ?? true,
  };
}
