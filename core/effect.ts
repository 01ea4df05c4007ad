// The outputs of the core: imperatives, plain data, executed by the shell in array
// order (conventions P2). Effects never depend on another effect's completion;
// anything whose completion matters comes back as a new event.
import type { ServerMessage } from "./protocol/messages.ts";
import type {
  ChunkData,
  ClientError,
  Headers,
  LifecycleTaskView,
  RequestId,
  StreamHead,
  WorkerId,
} from "./vocabulary.ts";

export type { ClientError };

export type Outcome = "completed" | "failed" | "cancelled" | "rejected";

/** A backend's X-Cache-Hit / X-Cache-Tokens-Reused, as a request ended (spec 004). */
export type CacheReport = { hit: boolean; tokensReused: number };

/**
 * What a waiting lifecycle caller is told (rendered by core/views/lifecycle_reply.ts):
 * `accepted` a load started (it is polled, never awaited); `refused` the task
 * failed at once; `finished` it ended while the caller waited; `pending` the
 * wait ran out first.
 */
/**
 * A request's tokens as its usage record keeps them (issue 26); null = the
 * answer did not say. `estimated`: completion counts the stream's content
 * deltas because the backend sent no usage.
 */
export type TokenUsage = {
  prompt: number | null;
  completion: number | null;
  cached: number | null;
  estimated: boolean;
};

export type LifecycleReplyKind =
  | "accepted"
  | "refused"
  | "finished"
  | "pending";

/** Why a model load started (issue 30): a request needed it, or the worker reported one. */
export type ModelLoadReason = "demand" | "reported";

export type LogLevel = "debug" | "info" | "warn" | "error";

export type Effect =
  // -- worker sockets -------------------------------------------------------------
  | { kind: "acceptWorker"; workerId: WorkerId }
  /** Refuse a worker connection: close with `code` (1008 auth, C41) and a reason. */
  | { kind: "rejectWorker"; workerId: WorkerId; code: number; reason: string }
  | { kind: "sendToWorker"; workerId: WorkerId; message: ServerMessage }
  | { kind: "closeWorker"; workerId: WorkerId; code: number; reason: string }
  // -- clients ----------------------------------------------------------------------
  /** A whole response, passed through from the worker (C14). Ends the request. */
  | {
    kind: "respond";
    requestId: RequestId;
    status: number;
    headers: Headers;
    /**
     * Issue 24: the pieces a worker sent before its completion
     * (body-chunks-v1), as UTF-8 bytes, never joined; the client gets them, then
     * `body`. Absent when the answer came in one frame.
     */
    bodyPieces?: Uint8Array[];
    body: string;
    /** body-bytes-v1 (issue 25): bytes that follow `body`, base64; absent = none. */
    bodyBase64?: string;
    /** Time spent queued, for X-Queue-Wait-Ms (spec 004); absent = 0. */
    queueWaitMs?: number;
  }
  /** An error response in the route's shape. Ends the request. */
  | {
    kind: "respondError";
    requestId: RequestId;
    error: ClientError;
    queueWaitMs?: number;
  }
  /**
   * Open a streamed response; chunks follow. Without `head`, the relay's SSE
   * head (status 200); with it (stream-head-v1, issue 25), the backend's.
   */
  | {
    kind: "startStream";
    requestId: RequestId;
    queueWaitMs?: number;
    head?: StreamHead;
  }
  /**
   * Write the chunk byte for byte (C15): a string UTF-8 encoded, bytes
   * (chunk-bytes-v1) as they are.
   */
  | { kind: "writeChunk"; requestId: RequestId; chunk: ChunkData }
  /**
   * Issue 33.3: the client of a `respond` with pieces took none of its bytes
   * for CLIENT_WRITE_TIMEOUT_SECS: close its connection (the answer is lost to
   * it), which lets the bytes go; the close comes back as `responseSent`.
   */
  | { kind: "cutResponse"; requestId: RequestId }
  /** End a started stream; with `error`, an SSE error event goes first (C16, C24, C48). */
  | { kind: "endStream"; requestId: RequestId; error: ClientError | null }
  // -- observability ------------------------------------------------------------------
  | {
    kind: "log";
    level: LogLevel;
    message: string;
    fields: Record<string, string | number>;
  }
  /**
   * One per accepted or refused request, when it ends: everything the metrics
   * count about a request, so the shell keeps no per-request table of its own.
   */
  | {
    kind: "requestFinished";
    requestId: RequestId;
    /** The client route it came in on (endpoint path). */
    route: string;
    model: string;
    tenant: string;
    outcome: Outcome;
    status: number;
    durationMs: number;
    queueWaitMs: number;
    firstByteMs: number | null;
    requeues: number;
    /** What the backend's final answer said about its cache; null when nothing. */
    cacheReport: CacheReport | null;
    /** Issue 26 (the usage ledger): the API key, null when none. */
    keyId: string | null;
    keyName: string | null;
    /** The model the client named (an alias), and the one it was routed and served as (`model`). */
    modelAsked: string;
    modelServed: string;
    /** The worker that last held it; null when it never left the queue. */
    workerName: string | null;
    usage: TokenUsage;
  }
  // -- models across the fleet (issue 30, core/state/residency.ts) -----------------
  /**
   * A model starts loading on a worker: `demand`, the core sent it a request
   * for a model it did not hold (`triggeredBy`); `reported`, the worker's
   * residency report says so (an operator's or the backend's own load).
   * `evicting`: the model the backend unloads to make room, when the core
   * knows it.
   */
  | {
    kind: "modelLoadStarted";
    workerId: WorkerId;
    workerName: string;
    model: string;
    /** The request that needed it (`demand`); null when reported. */
    triggeredBy: RequestId | null;
    reason: ModelLoadReason;
    evicting: string | null;
  }
  /** A model is loaded on a worker; `loadMs` from its load's start, null when the start was not seen. */
  | {
    kind: "modelLoadFinished";
    workerId: WorkerId;
    workerName: string;
    model: string;
    loadMs: number | null;
  }
  /** A model left a worker's memory (to make room, or as its report says). */
  | {
    kind: "modelEvicted";
    workerId: WorkerId;
    workerName: string;
    model: string;
  }
  /** A lifecycle task changed (progress, completion, failure). */
  | { kind: "lifecycleTaskChanged"; task: LifecycleTaskView }
  /** The answer to the HTTP call that started `task` (lifecycleRequested with replyWanted). */
  | {
    kind: "replyLifecycle";
    reply: LifecycleReplyKind;
    task: LifecycleTaskView;
  }
  /** Server shutdown finished: every request ended, every worker closed (C30). */
  | { kind: "shutdownComplete" };

export type EffectKind = Effect["kind"];
