// The error catalogue (issue 34): every error code a client, an operator or a
// server can read from this relay, with its HTTP status, its message template
// and its Retry-After rule; and the one function that builds an error from it,
// `apiError`. The core, the worker (core and shell), the server shell and the
// admin routes all build their errors here, so a code means one thing wherever
// it is written. `errorType` is the one status -> `type` map of both body
// shapes (core/protocol/error_body.ts writes the body).
//
// A 404 reads `invalid_request_error` in the OpenAI shape on every route that
// answers in it (/v1/*, /admin/*, /metrics), as OpenAI's own API answers an
// unknown model or URL, and `not_found_error` in Anthropic's (/v1/messages), as
// Anthropic's does (C120).
import type { ClientApi, ClientError } from "../vocabulary.ts";

/**
 * Where a refusal's Retry-After comes from:
 *   "none"     no header: retrying the same request will not help, or the
 *              client decides (404, 400, a broken stream);
 *   "config"   RETRY_AFTER_SECS (Config.retryAfterSecs), a short "soon";
 *   "measured" computed by the caller from what it measured (a rate window's
 *              reset, the queue's average wait);
 *   a number   that many seconds, fixed.
 */
export type RetryAfterRule = "none" | "config" | "measured" | number;

type Empty = Record<never, never>;

type Entry<P, R extends RetryAfterRule> = {
  /** "given": the caller's `status` (an answer relayed with its own). */
  status: number | "given";
  retryAfter: R;
  message: (p: P) => string;
};

function def<P = Empty, R extends RetryAfterRule = "none">(
  status: number | "given",
  retryAfter: R,
  message: (p: P) => string,
): Entry<P, R> {
  return { status, retryAfter, message };
}

/** A message the caller words (a validator's explanation of what is wrong). */
type Detail = { detail: string };
const detail = (p: Detail) => p.detail;

/** The two codes of an answer cut for its size share one message (answerTooLarge). */
export type TooLarge = {
  limit: number;
  unit: "characters" | "bytes";
  of: string;
};
const tooLarge = (p: TooLarge) =>
  `response too large: more than ${p.limit} ${p.unit} ${p.of}`;

/** Operator routes that take one method, or a few. */
type Method = { use: string; path: string };

export const ERRORS = {
  // ---- a request refused before it runs (core/events/on_request_received.ts)
  shutting_down: def(
    503,
    "config",
    () => "server is shutting down; retry shortly",
  ),
  provider_disabled: def(
    503,
    "config",
    () => "Provider is currently disabled",
  ),
  model_not_found: def(
    404,
    "none",
    (p: { model: string; why: string }) =>
      `no provider for model "${p.model}": ${p.why} (GET /v1/models lists the models available)`,
  ),
  binary_body_unsupported: def(
    501,
    "none",
    (p: { model: string; path: string; extension: string }) =>
      `the request body is not UTF-8 text, and no connected worker serving "${p.model}" on ${p.path} can carry it (only workers that negotiated ${p.extension} can; workers of the original dialect carry text bodies only)`,
  ),
  queue_full: def(
    503,
    "measured",
    (p: { waiting: number; max: number; tenant: string | null }) =>
      p.tenant === null
        ? `queue full: ${p.waiting}/${p.max} requests already waiting; retry later`
        : `queue full for tenant ${p.tenant}: ${p.max} of its requests already waiting; retry later`,
  ),
  rate_limit_exceeded: def(
    429,
    "measured",
    (p: { who: string; limit: number; per: string }) =>
      `${p.who} exceeded ${p.limit} ${p.per}`,
  ),
  token_rate_limited: def(
    429,
    "measured",
    (p: { who: string; used: number; limit: number; per: string }) =>
      `${p.who} used ${p.used} of its ${p.limit} tokens per ${p.per}`,
  ),
  token_budget_exceeded: def(
    429,
    "measured",
    (p: { who: string; used: number; limit: number; per: string }) =>
      `${p.who} used ${p.used} of its ${p.limit} tokens per ${p.per} budget`,
  ),

  // ---- a request that ran and failed (core/events, core/state/requests.ts)
  queue_timeout: def(
    504,
    "none",
    () => "queue timeout: no worker available within deadline",
  ),
  request_timeout: def(
    504,
    "none",
    (p: { idleSecs?: number }) =>
      p.idleSecs === undefined
        ? "request timeout"
        : `request timeout: no data for ${p.idleSecs} s`,
  ),
  requeue_exhausted: def(
    503,
    "config",
    // "attempts", not "workers" (issue 24.5, C61): with one worker serving
    // the model, every attempt was on the same one.
    (p: { attempts: number; cause: string }) =>
      `requeue attempts exhausted: the request failed ${p.attempts} attempts (${p.cause})`,
  ),
  worker_disconnected: def(
    502,
    "none",
    (p: { cause: string }) => `${p.cause}; the stream cannot be resumed`,
  ),
  upstream_error: def(
    502,
    "none",
    (p: { status: number }) =>
      `the backend failed with status ${p.status} after the stream started`,
  ),
  client_too_slow: def(
    503,
    "none",
    () => "client did not read the stream fast enough",
  ),
  response_buffer_full: def(
    503,
    "measured",
    // Issue 33: the fleet's budget, or one tenant's share of it.
    (p: { held: number; max: number; tenant?: string }) =>
      p.tenant === undefined
        ? `the relay is holding ${p.held} bytes of other answers (MAX_BUFFERED_RESPONSE_BYTES ${p.max}); retry later`
        : `the relay is holding ${p.held} bytes of tenant ${p.tenant}'s other answers (TENANT_MAX_BUFFERED_RESPONSE_BYTES ${p.max}); retry later`,
  ),
  response_too_large: def(502, "none", tooLarge),
  stream_too_large: def(502, "none", tooLarge),

  // ---- written by the worker (core/worker, shell/worker) --------------------
  worker_draining: def(
    503,
    "none",
    detail,
  ),
  backend_unreachable: def(502, "none", detail),
  backend_error: def(502, "none", detail),
  /** Scoped `error` frame codes (issue 14), relayed to a client mid-stream. */
  backend_unavailable: def(502, "none", detail),
  backend_stream_broken: def(502, "none", detail),
  backend_protocol_error: def(
    502,
    "none",
    (p: { why: string }) =>
      `the backend's answer is not valid HTTP/1.1: ${p.why}`,
  ),

  // ---- a cluster of relay instances (core/cluster) ---------------------------
  cluster_unavailable: def(
    503,
    2,
    () => "the relay cluster's shared log is unreachable; retry shortly",
  ),
  cluster_instance_reset: def(
    503,
    1,
    () => "the relay instance lost its cluster membership; retry",
  ),
  cluster_link_lost: def(
    502,
    "none",
    () =>
      "the link between relay instances carrying this answer broke; retry the request",
  ),
  invalid_cluster_secret: def(401, "none", () => "not a cluster peer"),

  // ---- the HTTP front door (shell/server/http) --------------------------------
  bad_request: def(
    400,
    "none",
    (p: { what: "HTTP request" | "request target" }) => `malformed ${p.what}`,
  ),
  headers_too_large: def(431, "none", () => "request headers are too large"),
  not_found: def(
    404,
    "none",
    // `only`: what this listener serves (METRICS_PORT's serves /metrics).
    (p: { method: string; path: string; only?: string }) =>
      `no route for ${p.method} ${p.path}${
        p.only === undefined ? "" : `: this port serves only ${p.only}`
      }`,
  ),
  method_not_allowed: def(
    405,
    "none",
    (p: Method) => `use ${p.use} for ${p.path}`,
  ),
  upgrade_required: def(
    426,
    "none",
    () =>
      "workers connect here with a WebSocket upgrade and the X-Worker-Secret header",
  ),
  internal_error: def(
    500,
    "none",
    (p: { what: string }) => `internal error: ${p.what}`,
  ),
  // Long enough for the connections over the cap to finish.
  too_many_connections: def(
    503,
    1,
    (p: { max: number }) =>
      `the relay has ${p.max} open connections (MAX_CONNECTIONS); retry shortly`,
  ),
  cors_origin_not_allowed: def(
    403,
    "none",
    (p: { origin: string }) =>
      `origin ${p.origin} is not in CORS_ALLOW_ORIGINS; add it there to call this relay from that page`,
  ),
  body_too_large: def(
    413,
    "none",
    (p: { max: number }) => `request body exceeds ${p.max} bytes`,
  ),
  body_timeout: def(
    408,
    "none",
    (p: { secs: number }) =>
      `request body not received in full within ${p.secs} s`,
  ),
  invalid_json: def(400, "none", () => "request body is not valid JSON"),
  invalid_body: def(400, "none", detail),
  invalid_stream: def(400, "none", () => '"stream" must be true or false'),
  model_required: def(
    400,
    "none",
    () =>
      'the request names no model: put "model" in the JSON body, an X-Model header, or a multipart form field "model" (GET /v1/models lists them)',
  ),
  invalid_tenant: def(
    400,
    "none",
    (p: { rule: string }) => `X-Tenant-ID must be ${p.rule}`,
  ),
  invalid_priority: def(
    400,
    "none",
    () => "X-Priority must be high, normal or low",
  ),
  invalid_cache_mode: def(
    400,
    "none",
    () => "X-Cache-Mode must be prefix, none or auto",
  ),
  invalid_cache_tag: def(
    400,
    "none",
    () => "X-Cache-Tag must be at most 64 characters",
  ),
  tenant_mismatch: def(403, "none", detail),

  // ---- client credentials (shell/server/relay.ts) ----------------------------
  missing_api_key: def(
    401,
    "none",
    (p: { how: string }) =>
      `this relay requires an API key (MODELRELAY_REQUIRE_API_KEYS=true): ${p.how}; keys are created with POST /admin/keys`,
  ),
  invalid_api_key: def(
    401,
    "none",
    (p: { how: string }) => `the API key is invalid or was revoked; ${p.how}`,
  ),
  key_store_unavailable: def(
    503,
    5,
    () => "the API key store is unavailable; try again shortly",
  ),
  missing_metrics_token: def(
    401,
    "none",
    (p: { how: string }) => `/metrics needs a token: ${p.how}`,
  ),
  invalid_metrics_token: def(
    403,
    "none",
    (p: { how: string }) => `the token does not match; ${p.how}`,
  ),

  // ---- the operator routes (shell/server/ops) --------------------------------
  starting: def(503, 1, () => "the server is still starting"),
  admin_disabled: def(
    403,
    "none",
    () =>
      "the admin API is disabled: start the server with MODELRELAY_ADMIN_TOKEN=<token> (or --admin-token <token>) and send Authorization: Bearer <token>",
  ),
  missing_admin_token: def(
    403,
    "none",
    () =>
      "send the admin token as Authorization: Bearer <MODELRELAY_ADMIN_TOKEN>",
  ),
  invalid_admin_token: def(
    403,
    "none",
    () => "the admin token does not match MODELRELAY_ADMIN_TOKEN",
  ),
  admin_only: def(
    403,
    "none",
    () =>
      "per-worker capabilities (?worker=) need the admin token (Authorization: Bearer <MODELRELAY_ADMIN_TOKEN>)",
  ),
  // An operator path with a broken escape, or (issue 33) a forwarded path
  // that could leave the prefix it was sent to.
  invalid_path: def(
    400,
    "none",
    (p: { segment?: string; why?: string }) =>
      p.why !== undefined
        ? `the path has ${p.why}; the relay forwards only plain paths (no encoded separators, backslashes or dot segments)`
        : `the path segment "${p.segment}" has a malformed percent-escape`,
  ),
  // Issue 33: the worker door's failure throttle, on admin and metrics tokens.
  too_many_auth_failures: def(
    429,
    "measured",
    (p: { retryAfterSecs: number }) =>
      `too many wrong tokens from this address: retry in ${p.retryAfterSecs} s`,
  ),
  worker_not_found: def(
    404,
    "none",
    (p: { id: string }) =>
      `no connected worker "${p.id}" (see GET /admin/workers)`,
  ),
  invalid_name: def(400, "none", detail),
  invalid_scope: def(400, "none", detail),
  invalid_limit: def(400, "none", detail),
  keys_unavailable: def(503, "none", () => "the key store is not open"),
  key_store_error: def(
    500,
    "none",
    (p: { why: string }) => `the key store failed: ${p.why}`,
  ),
  key_not_found: def(
    404,
    "none",
    (p: { id: string }) => `no API key with id ${p.id}`,
  ),
  usage_ledger_disabled: def(
    404,
    "none",
    () =>
      "the usage ledger is off: it is kept when the admin API or API keys are on and USAGE_RETENTION_DAYS is above 0",
  ),
  invalid_query: def(400, "none", detail),
  invalid_group_by: def(400, "none", detail),
  invalid_from: def(400, "none", detail),
  invalid_to: def(400, "none", detail),
  invalid_range: def(400, "none", detail),

  // ---- model lifecycle (spec 004; shell/server/ops, core/state/lifecycle.ts) -
  invalid_task_id: def(
    400,
    "none",
    (p: { raw: string }) =>
      `the task id "${p.raw}" has a malformed percent-escape`,
  ),
  task_not_found: def(
    404,
    "none",
    (p: { id: string }) =>
      `no lifecycle task "${p.id}" (finished tasks are kept for a while, then forgotten)`,
  ),
  task_lost: def(500, "none", detail),
  missing_model_id: def(
    400,
    "none",
    () => 'request body needs a "modelId" string',
  ),
  missing_scope_value: def(
    400,
    "none",
    (p: { scope: string; need: string }) =>
      `scope "${p.scope}" needs a "${p.need}" string`,
  ),
  lifecycle_unconfigured: def(503, "none", detail),
  lifecycle_not_supported: def(501, "none", detail),
  /** Its status is the workers' own when they agree on one (a 4xx/5xx), else 502. */
  lifecycle_failed: def(
    "given",
    "none",
    (p: Detail & { status: number }) => p.detail,
  ),
  model_not_loaded: def(
    404,
    "none",
    (p: { model: string; operation: string }) =>
      `model "${p.model}" is not loaded on any worker that supports ${p.operation}`,
  ),
  invalid_op_token: def(
    400,
    "none",
    (p: { what: string }) =>
      `verifiedOpToken is malformed: ${p.what} (expected {"opToken":{"operation","modelId","issuedAt","signers","nonce"},"signature"} as JSON or base64url JSON)`,
  ),
  missing_op_token: def(401, "none", detail),
  op_token_bad_signature: def(
    401,
    "none",
    () =>
      "verifiedOpToken signature does not verify: HMAC-SHA256 over the canonical JSON of opToken (sorted keys, no spaces) with the key at VERIFIED_OP_TOKEN_KEY_PATH, as hex or base64url",
  ),
  op_token_wrong_operation: def(403, "none", detail),
  op_token_wrong_model: def(403, "none", detail),
  op_token_params_mismatch: def(403, "none", detail),
  op_token_expired: def(401, "none", detail),
  op_token_insufficient_signers: def(403, "none", detail),
  op_token_replayed: def(409, "none", detail),
} as const;

export type ErrorCode = keyof typeof ERRORS;

type Spec<C extends ErrorCode> = (typeof ERRORS)[C];
type ParamsOf<C extends ErrorCode> = Parameters<Spec<C>["message"]>[0] extends
  infer P ? (unknown extends P ? Empty : P) : never;
type RetryOf<C extends ErrorCode> = Spec<C>["retryAfter"] extends
  "config" | "measured" ? { retryAfterSecs: number } : Empty;
type Args<C extends ErrorCode> = keyof (ParamsOf<C> & RetryOf<C>) extends never
  ? []
  : [params: ParamsOf<C> & RetryOf<C>];

/** The 503 of a relay that is shutting down, for a new request and one it drops alike. */
export function shuttingDown(config: { retryAfterSecs: number }): ClientError {
  return apiError("shutting_down", { retryAfterSecs: config.retryAfterSecs });
}

/** True when `code` is one of the catalogue's. */
export function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERRORS, code);
}

/**
 * The one way to build an error: its status and message from the catalogue,
 * its Retry-After by the entry's rule ("config" and "measured" take
 * `retryAfterSecs` from the caller; a fixed number is the entry's own).
 */
export function apiError<C extends ErrorCode>(
  code: C,
  ...args: Args<C>
): ClientError {
  const spec = ERRORS[code] as Entry<unknown, RetryAfterRule>;
  const params = (args[0] ?? {}) as { retryAfterSecs?: number };
  const error: ClientError = {
    status: spec.status === "given"
      ? (params as { status: number }).status
      : spec.status,
    code,
    message: spec.message(params),
  };
  const rule = spec.retryAfter;
  if (typeof rule === "number") error.retryAfterSecs = rule;
  else if (rule !== "none") error.retryAfterSecs = params.retryAfterSecs!;
  return error;
}

/** Issue 33: a backend status outside 200-599 (the relay's body, never the backend's). */
export function notFinalStatus(status: number): ClientError {
  return apiError("backend_protocol_error", {
    why:
      `it answered with status ${status}, which is not a final HTTP status (200-599)`,
  });
}

/** An answer cut for its size: `stream_too_large` for a stream, else `response_too_large`. */
export function answerTooLarge(
  streaming: boolean,
  limit: TooLarge,
): ClientError {
  return apiError(streaming ? "stream_too_large" : "response_too_large", limit);
}

/**
 * A worker's own error, relayed mid-stream: the worker's code (ours are in the
 * catalogue; a foreign worker's may not be), its message prefixed. The one
 * place a code from the wire reaches a client.
 */
export function relayedWorkerError(code: string, message: string): ClientError {
  return {
    status: 502,
    code: code === "" ? "upstream_error" : code,
    message: `worker error: ${message}`,
  };
}

/**
 * The error's `type`, by the route's body shape and the status: OpenAI's
 * (invalid_request_error, authentication_error, permission_error,
 * rate_limit_error, server_error) or Anthropic's (invalid_request_error,
 * authentication_error, permission_error, not_found_error, request_too_large,
 * rate_limit_error, api_error, overloaded_error, timeout_error).
 */
export function errorType(shape: ClientApi, status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 429) return "rate_limit_error";
  if (shape === "openai") {
    return status < 500 ? "invalid_request_error" : "server_error";
  }
  switch (status) {
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 503:
      return "overloaded_error";
    case 504:
      return "timeout_error";
    default:
      return status < 500 ? "invalid_request_error" : "api_error";
  }
}
