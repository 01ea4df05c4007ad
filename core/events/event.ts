// The inputs of the core: facts in the past tense, stamped by the shell (or the
// simulator's virtual clock) with a monotonic `atMs`. Plain data only.
import type { KeyRef } from "../config.ts";
import type { DecodeError } from "../protocol/decode.ts";
import type { TokenAsk } from "../state/usage.ts";
import type {
  LifecycleOperation,
  LifecycleProgressStatus,
  RunnerCapabilities,
  TokenCounts,
} from "../protocol/messages.ts";

import type {
  ChunkData,
  ClientApi,
  Headers,
  Priority,
  RequestId,
  WorkerId,
} from "../vocabulary.ts";

export type { ChunkData, ClientApi, Headers, Priority, RequestId, WorkerId };

export type Event =
  // -- worker connection --------------------------------------------------------
  | {
    kind: "workerConnectAttempted";
    atMs: number;
    workerId: WorkerId;
    provider: string;
    clientIp: string;
    secretValid: boolean;
  }
  | {
    kind: "registerReceived";
    atMs: number;
    workerId: WorkerId;
    workerName: string;
    models: string[];
    maxConcurrent: number;
    protocolVersion: string | null;
    currentLoad: number;
    /** Extensions the worker listed in register (ours); absent = none. */
    extensions?: string[];
    /** register's `endpoint_prefixes` (issue 25); absent = the field was not sent. */
    endpointPrefixes?: string[];
  }
  | {
    kind: "modelsUpdateReceived";
    atMs: number;
    workerId: WorkerId;
    models: string[];
    currentLoad: number | null;
    /** drain-v1: the worker is draining (absent = false). */
    draining?: boolean;
  }
  | {
    kind: "pongReceived";
    atMs: number;
    workerId: WorkerId;
    currentLoad: number | null;
  }
  | {
    kind: "chunkReceived";
    atMs: number;
    workerId: WorkerId;
    requestId: RequestId;
    /** Bytes only from a chunk-bytes-v1 binary frame (issue 18). */
    chunk: ChunkData;
  }
  | {
    kind: "completeReceived";
    atMs: number;
    workerId: WorkerId;
    requestId: RequestId;
    statusCode: number;
    headers: Headers;
    body: string;
    tokenCounts: TokenCounts | null;
    /** body-bytes-v1: the answer's body is not text, base64 (issue 25); absent = text. */
    bodyBase64?: string;
  }
  /** stream-head-v1 (issue 25): a streamed answer's status and headers, before its first chunk. */
  | {
    kind: "headReceived";
    atMs: number;
    workerId: WorkerId;
    requestId: RequestId;
    statusCode: number;
    headers: Headers;
  }
  | {
    kind: "workerErrorReceived";
    atMs: number;
    workerId: WorkerId;
    requestId: RequestId | null;
    code: string;
    message: string;
  }
  | {
    kind: "workerFrameInvalid";
    atMs: number;
    workerId: WorkerId;
    error: DecodeError;
  }
  | {
    kind: "workerDisconnected";
    atMs: number;
    workerId: WorkerId;
    reason: string;
  }
  // -- protocol extensions (issue 9) -----------------------------------------------
  | {
    kind: "capabilitiesReceived";
    atMs: number;
    workerId: WorkerId;
    capabilities: RunnerCapabilities;
  }
  | {
    kind: "lifecycleProgressReceived";
    atMs: number;
    workerId: WorkerId;
    taskId: string;
    status: LifecycleProgressStatus;
    progress: number | null;
    error: string | null;
    result: Record<string, unknown> | null;
  }
  /** residency-v1 (issue 30): the models resident on the worker's backend, the whole picture. */
  | {
    kind: "residencyReceived";
    atMs: number;
    workerId: WorkerId;
    loaded: string[];
    loading: string[];
    /** How many models the backend holds at once; null = no limit reported. */
    room: number | null;
  }
  /** A verified lifecycle operation (the shell checked its op token and minted `taskId`). */
  | {
    kind: "lifecycleRequested";
    atMs: number;
    taskId: string;
    operation: LifecycleOperation;
    /** The model the operation is about; null for a cache flush not scoped to a model. */
    modelId: string | null;
    /** Passed to the worker as is (cache-flush reads `scope`). */
    params: Record<string, unknown>;
    /** A worker chosen by the caller, else the core picks. */
    workerId: WorkerId | null;
    /**
     * An HTTP caller waits for a `replyLifecycle` (the server); false when
     * nobody does (the simulator's operators poll nothing).
     */
    replyWanted: boolean;
  }
  // -- clients ------------------------------------------------------------------
  | {
    kind: "requestReceived";
    atMs: number;
    requestId: RequestId;
    api: ClientApi;
    endpointPath: string;
    /** The client's HTTP method (issue 25); absent = POST. */
    method?: string;
    model: string;
    isStreaming: boolean;
    /** The raw body, forwarded untouched: text, or base64 when `bodyBase64`. */
    body: string;
    /** The body is not UTF-8 and travels as base64 (body-bytes-v1, issue 25). */
    bodyBase64?: boolean;
    /** Lowercased request headers; the core keeps only the forwardable ones (C13). */
    headers: Headers;
    /** X-Tenant-ID, or the tenant bound to the API key; absent = "default". */
    tenant?: string;
    /** X-Priority; absent = "normal". */
    priority?: Priority;
    /** Cache affinity key (X-Cache-Tag, prompt_cache_key or user); absent or null = none. */
    cacheKey?: string | null;
    /** The client's API key and its limits (issue 26); absent = none. */
    key?: KeyRef | null;
    /** The model the client named when `model` is its alias target (issue 26's record); absent = `model`. */
    modelAsked?: string;
    /** What the parsed JSON body asks of token accounting (issue 33); absent = nothing known. */
    tokenAsk?: TokenAsk;
  }
  | { kind: "clientDisconnected"; atMs: number; requestId: RequestId }
  /** The shell's per-stream buffer for a slow client hit its cap. */
  | { kind: "clientStalled"; atMs: number; requestId: RequestId }
  /**
   * A `respond` with `bodyPieces` is written out, or its client left (issue
   * 24): its bytes leave the fleet's buffered-body budget.
   */
  | { kind: "responseSent"; atMs: number; requestId: RequestId }
  /**
   * Issue 33.3: `written` bytes of a `respond`'s pieces have left the shell
   * for the client's socket so far (reported as the socket drains).
   */
  | {
    kind: "responseProgress";
    atMs: number;
    requestId: RequestId;
    written: number;
  }
  // -- time and operator commands -------------------------------------------------
  /** `unixMs`: the shell's wall clock, only echoed in pings (the core never reasons on it). */
  | { kind: "tick"; atMs: number; unixMs?: number }
  | {
    kind: "workerDrainRequested";
    atMs: number;
    workerId: WorkerId;
    reason: string;
  }
  | {
    kind: "modelsRefreshRequested";
    atMs: number;
    workerId: WorkerId | null;
    reason: string;
  }
  | { kind: "shutdownRequested"; atMs: number };

export type EventKind = Event["kind"];
