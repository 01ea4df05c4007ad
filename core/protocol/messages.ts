// The WebSocket wire protocol between server and worker, exactly as the original
// ModelRelay speaks it (serde tagged enums: a "type" field, snake_case names).
// Unknown extra fields are ignored, never rejected (checklist C40), so zod objects
// here are the default (stripping) kind, not strict.
import { z } from "zod";

/** The protocol version our worker sends: the one the original Rust server accepts (C39). */
export const PROTOCOL_VERSION_BRIDGE = "2026-04-bridge-v1";
/** Versions our server accepts besides an absent one (C39). */
export const ACCEPTED_PROTOCOL_VERSIONS: readonly string[] = [
  "1",
  PROTOCOL_VERSION_BRIDGE,
];

const count = z.number().int().min(0).max(0xffff_ffff);

// ---- protocol extensions (issue 9) -------------------------------------------
// Negotiated, never assumed: our worker lists the extensions it speaks in
// `register.extensions` (an added field the original server ignores); our server
// answers with the ones it supports in `register_ack.extensions`, only to a
// worker that sent the field. Extension frames flow only when both sides listed
// the extension, so an original worker or server never sees an unknown frame.
export const EXTENSION_CAPABILITIES = "capabilities-v1";
export const EXTENSION_LIFECYCLE = "lifecycle-v1";
/**
 * drain-v1 (issue 14): a worker draining on SIGTERM keeps its models in
 * `models_update` and adds `draining: true`, so its models queue instead of
 * answering 404 while it finishes.
 */
export const EXTENSION_DRAIN = "drain-v1";
/**
 * body-chunks-v1 (issue 14): a non-streaming answer may arrive as
 * `response_chunk` frames and a `response_complete` carrying the remainder, so
 * no frame outgrows the frame limit.
 */
export const EXTENSION_BODY_CHUNKS = "body-chunks-v1";
/**
 * chunk-bytes-v1 (issue 18): a streamed chunk may arrive as a binary WebSocket
 * frame (binary.ts) carrying the backend's bytes as they are, instead of a
 * JSON-escaped `response_chunk` text frame.
 */
export const EXTENSION_CHUNK_BYTES = "chunk-bytes-v1";
/**
 * body-bytes-v1 (issue 25): bodies that are not text travel as base64, a
 * `request`'s in `body_base64`, a non-streaming answer's in `response_complete`'s
 * `body_base64`; a stream's binary answer leaves as chunk-bytes-v1 frames with
 * its bytes untouched (no UTF-8 repair). A request whose body is not UTF-8 goes
 * only to a worker that negotiated it.
 */
export const EXTENSION_BODY_BYTES = "body-bytes-v1";
/**
 * stream-head-v1 (issue 25): before the first chunk of a streamed answer that
 * is not server-sent events, the worker sends `response_head` with the
 * backend's status and headers; the server answers the client with them
 * instead of its fixed SSE head. One frame per stream, none per chunk.
 */
export const EXTENSION_STREAM_HEAD = "stream-head-v1";
/**
 * residency-v1 (issue 30): the worker reports which models its backend holds
 * (`loaded`), is loading (`loading`), and how many it holds at once (`room`),
 * in a `residency` frame after register_ack, after every answer, load and
 * unload, and on a timer. Every other acked model is `available` (loadable
 * there). A worker that sends none routes as before.
 */
export const EXTENSION_RESIDENCY = "residency-v1";
export const SUPPORTED_EXTENSIONS: readonly string[] = [
  EXTENSION_CAPABILITIES,
  EXTENSION_LIFECYCLE,
  EXTENSION_DRAIN,
  EXTENSION_BODY_CHUNKS,
  EXTENSION_CHUNK_BYTES,
  EXTENSION_BODY_BYTES,
  EXTENSION_STREAM_HEAD,
  EXTENSION_RESIDENCY,
];
export const LIFECYCLE_OPERATIONS = [
  "model-load",
  "model-unload",
  "cache-flush",
] as const;
export type LifecycleOperation = (typeof LIFECYCLE_OPERATIONS)[number];
export const LIFECYCLE_STATUSES = ["running", "completed", "failed"] as const;
export type LifecycleProgressStatus = (typeof LIFECYCLE_STATUSES)[number];

const jsonObject = z.record(z.string(), z.unknown());
const finite = z.number().finite();

/** Spec 004 `GET /v1/capabilities` as a worker reports it; every field optional, unknown ones kept. */
export const runnerCapabilitiesSchema = z.looseObject({
  runnerType: z.string().nullish(),
  runnerId: z.string().nullish(),
  models: z.looseObject({
    loaded: z.array(z.looseObject({ id: z.string() })).nullish(),
    loading: z.array(z.looseObject({
      id: z.string(),
      progress: finite.nullish(),
      eta: finite.nullish(),
    })).nullish(),
    available: z.array(z.string()).nullish(),
  }).nullish(),
  resources: z.record(z.string(), z.unknown()).nullish(),
  queue: z.record(z.string(), z.unknown()).nullish(),
  capabilities: z.record(z.string(), z.unknown()).nullish(),
  health: z.string().nullish(),
});
export type RunnerCapabilities = z.infer<typeof runnerCapabilitiesSchema>;
const headerMap = z.record(z.string(), z.string());

export const CANCEL_REASONS = [
  "client_disconnect",
  "timeout",
  "graceful_shutdown",
  "worker_disconnect",
  "requeue_exhausted",
  "server_shutdown",
] as const;
export type KnownCancelReason = (typeof CANCEL_REASONS)[number];
/** A cancel reason is a known string or `{"other": text}` (serde's `Other(String)`, C40). */
export type CancelReason = KnownCancelReason | { other: string };
const cancelReason = z.union([
  z.enum(CANCEL_REASONS),
  z.object({ other: z.string() }),
]);

export const tokenCountsSchema = z.object({
  prompt_tokens: count.nullish(),
  completion_tokens: count.nullish(),
  total_tokens: count.nullish(),
});
export type TokenCounts = z.infer<typeof tokenCountsSchema>;

// ---- worker -> server -------------------------------------------------------

export const registerSchema = z.object({
  type: z.literal("register"),
  worker_name: z.string(),
  models: z.array(z.string()),
  // Sanitized (clamped) by the core, so any integer is accepted here (C4).
  max_concurrent: z.number().int(),
  protocol_version: z.string().nullish(),
  current_load: count.nullish(),
  /** Extensions this worker speaks (ours; the original server ignores it). */
  extensions: z.array(z.string()).nullish(),
  /**
   * The original's newer field (issue 25): path prefixes this worker serves;
   * empty or absent = every path.
   */
  endpoint_prefixes: z.array(z.string()).nullish(),
});
export const modelsUpdateSchema = z.object({
  type: z.literal("models_update"),
  models: z.array(z.string()),
  current_load: count.nullish(),
  /** drain-v1: the worker is draining; its models stay known but get no new work. */
  draining: z.boolean().nullish(),
});
export const responseChunkSchema = z.object({
  type: z.literal("response_chunk"),
  request_id: z.string(),
  chunk: z.string(),
});
export const responseCompleteSchema = z.object({
  type: z.literal("response_complete"),
  request_id: z.string(),
  status_code: z.number().int().min(100).max(999),
  headers: headerMap.nullish(),
  body: z.string().nullish(),
  token_counts: tokenCountsSchema.nullish(),
  /** body-bytes-v1: a body that is not text, base64 (then `body` is empty). */
  body_base64: z.string().nullish(),
});
/** Extension frame (stream-head-v1): a streamed answer's head, before its first chunk. */
export const responseHeadSchema = z.object({
  type: z.literal("response_head"),
  request_id: z.string(),
  status_code: z.number().int().min(100).max(999),
  headers: headerMap,
});
export const pongSchema = z.object({
  type: z.literal("pong"),
  current_load: count.nullish(),
  timestamp_unix_ms: z.number().nullish(),
});
export const workerErrorSchema = z.object({
  type: z.literal("error"),
  request_id: z.string().nullish(),
  code: z.string().nullish(),
  message: z.string(),
});

/** Extension frame (capabilities-v1): the runner's spec 004 capabilities. */
export const capabilitiesSchema = z.object({
  type: z.literal("capabilities"),
  capabilities: runnerCapabilitiesSchema,
});
/**
 * Extension frame (residency-v1, issue 30): the models resident on the
 * worker's backend. The whole picture each time, never a delta, so a lost or
 * reordered frame heals with the next one.
 */
export const residencySchema = z.object({
  type: z.literal("residency"),
  loaded: z.array(z.string()),
  loading: z.array(z.string()).nullish(),
  /** Models the backend holds at once (MAX_RESIDENT_MODELS); absent = no limit. */
  room: z.number().int().min(1).max(0xffff).nullish(),
});
/** Extension frame (lifecycle-v1): progress or the end of a lifecycle task. */
export const lifecycleProgressSchema = z.object({
  type: z.literal("lifecycle_progress"),
  task_id: z.string(),
  status: z.enum(LIFECYCLE_STATUSES),
  progress: z.number().min(0).max(1).nullish(),
  error: z.string().nullish(),
  result: jsonObject.nullish(),
});

export const workerMessageSchema = z.discriminatedUnion("type", [
  registerSchema,
  modelsUpdateSchema,
  responseChunkSchema,
  responseCompleteSchema,
  pongSchema,
  workerErrorSchema,
  capabilitiesSchema,
  lifecycleProgressSchema,
  responseHeadSchema,
  residencySchema,
]);
export type WorkerMessage = z.infer<typeof workerMessageSchema>;
/** Every frame type a worker may send, read off the schemas so no list drifts. */
export const WORKER_MESSAGE_TYPES: readonly WorkerMessage["type"][] =
  workerMessageSchema.options.map((s) => s.shape.type.value);
export type RegisterMessage = z.infer<typeof registerSchema>;
export type ResponseCompleteMessage = z.infer<typeof responseCompleteSchema>;

// ---- server -> worker -------------------------------------------------------

export const registerAckSchema = z.object({
  type: z.literal("register_ack"),
  worker_id: z.string(),
  models: z.array(z.string()),
  warnings: z.array(z.string()).nullish(),
  protocol_version: z.string().nullish(),
  // Our extension list (issue 9); the original ignores unknown fields.
  extensions: z.array(z.string()).nullish(),
  /** The worker's endpoint_prefixes echoed (issue 25), when it sent them. */
  endpoint_prefixes: z.array(z.string()).nullish(),
});
export const requestSchema = z.object({
  type: z.literal("request"),
  request_id: z.string(),
  model: z.string(),
  endpoint_path: z.string(),
  is_streaming: z.boolean(),
  body: z.string(),
  headers: headerMap.nullish(),
  /** The client's HTTP method (the original's newer field, issue 25); absent = POST. */
  method: z.string().nullish(),
  /** body-bytes-v1: a body that is not UTF-8, base64 (then `body` is empty). */
  body_base64: z.string().nullish(),
});
export const cancelSchema = z.object({
  type: z.literal("cancel"),
  request_id: z.string(),
  reason: cancelReason,
});
export const pingSchema = z.object({
  type: z.literal("ping"),
  timestamp_unix_ms: z.number().nullish(),
});
export const gracefulShutdownSchema = z.object({
  type: z.literal("graceful_shutdown"),
  reason: z.string().nullish(),
  drain_timeout_secs: z.number().min(0).nullish(),
});
export const modelsRefreshSchema = z.object({
  type: z.literal("models_refresh"),
  reason: z.string().nullish(),
});

/** Extension frame (lifecycle-v1): carry a verified operation to the backend. */
export const lifecycleRequestSchema = z.object({
  type: z.literal("lifecycle_request"),
  task_id: z.string(),
  operation: z.enum(LIFECYCLE_OPERATIONS),
  params: jsonObject,
});

export const serverMessageSchema = z.discriminatedUnion("type", [
  registerAckSchema,
  requestSchema,
  cancelSchema,
  pingSchema,
  gracefulShutdownSchema,
  modelsRefreshSchema,
  lifecycleRequestSchema,
]);
export type ServerMessage = z.infer<typeof serverMessageSchema>;
/** Every frame type the server may send, read off the schemas so no list drifts. */
export const SERVER_MESSAGE_TYPES: readonly ServerMessage["type"][] =
  serverMessageSchema.options.map((s) => s.shape.type.value);
export type RequestMessage = z.infer<typeof requestSchema>;
export type LifecycleRequestMessage = z.infer<typeof lifecycleRequestSchema>;
export type LifecycleProgressMessage = z.infer<typeof lifecycleProgressSchema>;
export type ResidencyMessage = z.infer<typeof residencySchema>;
