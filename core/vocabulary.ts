// The words every layer of the core shares, on the ground floor: ids, headers,
// priorities, the client-facing error, and the shape of a lifecycle task. Types
// only; nothing here imports from a layer above (tools/import_layers_test.ts).
import type { LifecycleOperation } from "./protocol/messages.ts";

export type WorkerId = string;
export type RequestId = string;
/** Which client API a request came in on: decides the error body shape in the shell. */
export type ClientApi = "openai" | "anthropic";
export type Headers = Record<string, string>;
/**
 * A piece of a streamed answer: text from a `response_chunk` text frame, or the
 * backend's bytes from a chunk-bytes-v1 binary frame (issue 18). Written to the
 * client as is either way; its `length` (UTF-16 units or bytes) is what the
 * stream limit counts.
 */
export type ChunkData = string | Uint8Array;
/** A streamed answer's head as the backend gave it (stream-head-v1, issue 25). */
export type StreamHead = { status: number; headers: Headers };
/** Spec 004 priority classes (X-Priority). */
export type Priority = "high" | "normal" | "low";

/** A client-facing error: the shell renders it in the route's own shape (C47). */
export type ClientError = {
  status: number;
  /** Machine-readable code, e.g. `queue_full`, `model_not_found`. */
  code: string;
  message: string;
  /** Seconds, set on 503/429 (C9, C47). */
  retryAfterSecs?: number;
  /** Extra fields for the error body (spec 004: limit, remaining, queueDepth, avgWaitMs…). */
  details?: Record<string, number | string>;
};

// ---- lifecycle tasks (spec 004 governed operations) --------------------------

export type LifecycleStatus = "running" | "completed" | "failed";

/** One worker's share of a task. */
export type LifecyclePart = {
  workerId: WorkerId;
  workerName: string;
  status: LifecycleStatus;
  /** 0..1; 1 once completed. */
  progress: number;
  error: string | null;
  result: Record<string, unknown> | null;
  deadlineAtMs: number;
};

export type LifecycleTask = {
  id: string;
  operation: LifecycleOperation;
  modelId: string | null;
  params: Record<string, unknown>;
  createdAtMs: number;
  updatedAtMs: number;
  finishedAtMs: number | null;
  status: LifecycleStatus;
  progress: number;
  /** Set when the task failed: the HTTP answer (501 when nothing can carry it out). */
  error: ClientError | null;
  parts: LifecyclePart[];
};

/** A plain copy of a task, carried by the `lifecycleTaskChanged` effect. */
export type LifecycleTaskView = Omit<LifecycleTask, "parts"> & {
  parts: LifecyclePart[];
};
