// Limits and timeouts of the core, as a plain object: the shell reads the
// environment and builds one; the core never reads env (conventions §1, §4).
import { PROTOCOL_FRAME_MAX } from "./protocol/frame_limit.ts";

export type ProviderConfig = {
  name: string;
  /** A disabled provider rejects workers and answers clients 503 (C2, C31). */
  enabled: boolean;
};

/** A request budget per sliding window (spec 004: `TENANT_RATE_LIMIT_<tenant>=100req/min`). */
export type RateLimit = { limit: number; windowMs: number };

/**
 * A token allowance per sliding window (issue 26): `20000tok/min` (a token rate
 * limit) or `5000000tok/day` (a token budget). A request's prompt plus
 * completion tokens count when it finishes.
 */
export type TokenLimit = { tokens: number; windowMs: number };

/**
 * The API key a request was made with, as the shell read it (issue 26): named
 * in its usage record, and its own limits apply beside its tenant's. Carried in
 * the event, so every replica of the core decides the same.
 */
export type KeyRef = {
  id: string;
  name: string;
  rateLimit: RateLimit | null;
  tokenRateLimit: TokenLimit | null;
  tokenBudget: TokenLimit | null;
};

export type Config = {
  providers: ProviderConfig[];
  /** Provider that client requests go to (PROVIDER_NAME). */
  defaultProvider: string;
  /** MAX_QUEUE_LEN, per provider (C9). */
  queueLenMax: number;
  /** QUEUE_TIMEOUT_SECS (C12). */
  queueTimeoutMs: number;
  /** REQUEST_TIMEOUT_SECS (C19, C48). */
  requestTimeoutMs: number;
  /** MAX_REQUEUE_COUNT (C23). */
  requeueCountMax: number;
  /** Ping period (C25, C43). */
  heartbeatIntervalMs: number;
  /** Pong window: no pong for this long closes the socket (C25). */
  heartbeatTimeoutMs: number;
  /** A worker that does not send `register` within this time is closed. */
  registerTimeoutMs: number;
  /** Slot kept reserved after a cancel until the worker acknowledges (C44). */
  cancelGraceMs: number;
  /** Drain timeout sent in graceful_shutdown and enforced by the server (C28, C30). */
  drainTimeoutMs: number;
  /** Cumulative streamed characters per request before the stream is cut (C16). */
  streamCharsMax: number;
  /** Largest accepted worker frame, in characters (C33). */
  frameCharsMax: number;
  /**
   * MAX_RESPONSE_BODY_BYTES: a non-streaming answer assembled from chunks
   * (body-chunks-v1) beyond this size fails 502 `response_too_large`. Pieces
   * count in UTF-8 bytes (issue 24); the completion's own body in UTF-16 code
   * units, which equal bytes for ASCII JSON.
   */
  responseBodyCharsMax: number;
  /**
   * MAX_BUFFERED_RESPONSE_BYTES (issue 24): the pieces of non-streaming
   * answers all requests together may hold, in UTF-8 bytes; a piece that
   * would go past it fails its request 503 `response_buffer_full` with
   * Retry-After.
   */
  responseBufferBytesMax: number;
  /**
   * TENANT_MAX_BUFFERED_RESPONSE_BYTES (issue 33.3): what one tenant's answers
   * may hold of that budget, so its clients that do not read cannot deny
   * everyone; null = half of `responseBufferBytesMax`.
   */
  tenantResponseBufferBytesMax: number | null;
  /**
   * CLIENT_WRITE_TIMEOUT_SECS (issue 33.3): an answer handed to the shell
   * whose client takes none of its bytes for this long is cut.
   */
  clientWriteTimeoutMs: number;
  /**
   * MODEL_GRACE_SECS (issue 24): a model whose last worker left within this
   * long is queued (then 504 at the queue timeout), not answered 404, while
   * other workers are connected: the gap of a rolling restart.
   */
  modelGraceMs: number;
  /**
   * SSE_KEEPALIVE_SECS (issue 30): a streaming request with no backend byte
   * yet gets `: keep-alive` after this long without a line (wait_lines.ts);
   * 0 = off.
   */
  sseKeepAliveMs: number;
  /** Consecutive `backend_unavailable` errors that open a worker's backend circuit (issue 14). */
  backendFailuresMax: number;
  /** First cool-down of an open circuit; doubles after each failed trial up to the max. */
  backendCoolDownMs: number;
  backendCoolDownMaxMs: number;
  /** Sanitization caps (C4). */
  modelsPerWorkerMax: number;
  modelNameCharsMax: number;
  workerNameCharsMax: number;
  maxConcurrentMax: number;
  /** Reject workers that omit protocol_version (C5: tolerated unless configured). */
  requireProtocolVersion: boolean;
  /** Failed worker auth attempts per client IP within the window before refusal (C2). */
  authFailuresMax: number;
  authFailureWindowMs: number;
  /** Retry-After (seconds) when nothing better is known (C9, C47). */
  retryAfterSecs: number;
  /** Upper bound for a computed Retry-After (spec 004 backpressure). */
  retryAfterMaxSecs: number;
  /** Queued requests one tenant may hold, besides the provider bound (spec 004). */
  tenantQueueLenMax: number;
  /**
   * Dispatch shares of the priority classes when all are waiting (stride
   * scheduling): high gets `high` dispatches for every `low` one, so low is
   * served less but never starved.
   */
  priorityWeights: { high: number; normal: number; low: number };
  /** Per-tenant limits; `defaultRateLimit` applies to tenants not listed (null = none). */
  rateLimits: Record<string, RateLimit>;
  defaultRateLimit: RateLimit | null;
  /** Issue 26: token rate limits and budgets per tenant, with defaults for tenants not listed (null = none). */
  tokenRateLimits: Record<string, TokenLimit>;
  defaultTokenRateLimit: TokenLimit | null;
  tokenBudgets: Record<string, TokenLimit>;
  defaultTokenBudget: TokenLimit | null;
  /**
   * ENABLE_MULTI_TENANT (spec 004, issue 32): false = one tenant, `default`,
   * for every request; X-Tenant-ID and a key's tenant are not read.
   */
  multiTenant: boolean;
  /** Cache affinity: remembered keys (LRU) and the load margin the preferred worker may exceed the least-loaded one by. */
  affinityKeysMax: number;
  affinityLoadMargin: number;
  /** Lifecycle tasks remembered; the oldest finished ones are evicted beyond this. */
  lifecycleTasksMax: number;
  /** A lifecycle task part with no final progress after this long fails. */
  lifecycleTaskTimeoutMs: number;
  /** How long an unload or flush caller waits for its task before a 202 with the task document. */
  lifecycleReplyWaitMs: number;
  /**
   * MODEL_ALIASES (issue 25): alias -> the model it is routed as. The backend
   * gets the target's name; /v1/models lists an alias beside its target.
   */
  modelAliases: Record<string, string>;
  /**
   * MODEL_DRAIN_MAX (issue 30.3): requests of its resident models a worker
   * takes in a row while a model no worker holds waits for room, before it
   * lets that model load. Bounds the wait of a lone request without swapping
   * on every request.
   */
  modelDrainMax: number;
  /** A model's load time assumed until a load is measured (issue 30). */
  modelLoadMsAssumed: number;
};

/**
 * The longest a model load may take, on both sides: the server's lifecycle task
 * times out after it (`lifecycleTaskTimeoutMs`'s default) and the worker stops
 * waiting for its backend's load then (shell/worker/lifecycle/backends.ts).
 */
export const MODEL_LOAD_MS_MAX = 30 * 60_000;

/** The per-tenant request and token limits with their defaults (issue 26). */
export type TenantLimits = Pick<
  Config,
  | "rateLimits"
  | "defaultRateLimit"
  | "tokenRateLimits"
  | "defaultTokenRateLimit"
  | "tokenBudgets"
  | "defaultTokenBudget"
>;

/** No tenant limited: fresh tables, for the shell to fill from its settings. */
export function noTenantLimits(): TenantLimits {
  return {
    rateLimits: {},
    defaultRateLimit: null,
    tokenRateLimits: {},
    defaultTokenRateLimit: null,
    tokenBudgets: {},
    defaultTokenBudget: null,
  };
}

export const DEFAULT_CONFIG: Config = {
  providers: [{ name: "local", enabled: true }],
  defaultProvider: "local",
  queueLenMax: 100,
  queueTimeoutMs: 30_000,
  requestTimeoutMs: 300_000,
  requeueCountMax: 3,
  heartbeatIntervalMs: 15_000,
  heartbeatTimeoutMs: 45_000,
  registerTimeoutMs: 10_000,
  cancelGraceMs: 5_000,
  drainTimeoutMs: 30_000,
  streamCharsMax: 64 * 1024 * 1024,
  frameCharsMax: PROTOCOL_FRAME_MAX,
  responseBodyCharsMax: 64 * 1024 * 1024,
  responseBufferBytesMax: 512 * 1024 * 1024,
  tenantResponseBufferBytesMax: null,
  clientWriteTimeoutMs: 30_000,
  modelGraceMs: 300_000,
  sseKeepAliveMs: 0,
  backendFailuresMax: 3,
  backendCoolDownMs: 5_000,
  backendCoolDownMaxMs: 60_000,
  modelsPerWorkerMax: 256,
  modelNameCharsMax: 256,
  workerNameCharsMax: 128,
  maxConcurrentMax: 1024,
  requireProtocolVersion: false,
  authFailuresMax: 10,
  authFailureWindowMs: 60_000,
  retryAfterSecs: 1,
  retryAfterMaxSecs: 60,
  tenantQueueLenMax: 100,
  priorityWeights: { high: 8, normal: 4, low: 1 },
  ...noTenantLimits(),
  multiTenant: true,
  affinityKeysMax: 10_000,
  affinityLoadMargin: 2,
  lifecycleTasksMax: 256,
  lifecycleTaskTimeoutMs: MODEL_LOAD_MS_MAX,
  lifecycleReplyWaitMs: 30_000,
  modelAliases: {},
  modelDrainMax: 8,
  modelLoadMsAssumed: 30_000,
};

/**
 * The largest non-streaming answer assembled from pieces: its own limit, and
 * never more than the whole budget (an answer that could never fit fails 502
 * at once, not 503 again and again).
 */
export function answerBytesMax(config: Config): number {
  return Math.min(config.responseBodyCharsMax, config.responseBufferBytesMax);
}

/** The limit an answer is cut at, as the one too-large message names it (core/protocol/errors.ts). */
export function answerLimit(config: Config, streaming: boolean): {
  limit: number;
  unit: "characters";
  of: string;
} {
  return streaming
    ? { limit: config.streamCharsMax, unit: "characters", of: "in a stream" }
    : { limit: answerBytesMax(config), unit: "characters", of: "in an answer" };
}

export function makeConfig(overrides: Partial<Config> = {}): Config {
  return { ...DEFAULT_CONFIG, ...overrides };
}
