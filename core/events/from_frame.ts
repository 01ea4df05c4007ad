// Turns a worker's text frame into a core event. Decoding is pure, so the
// simulator feeds this very function garbage (C33).
import { decodeBinaryWorkerFrame } from "../protocol/binary.ts";
import { decodeWorkerFrame } from "../protocol/decode.ts";
import type { Event, WorkerId } from "./event.ts";

export function eventFromFrame(
  workerId: WorkerId,
  atMs: number,
  text: string,
  maxChars: number,
): Event {
  const decoded = decodeWorkerFrame(text, maxChars);
  if (!decoded.ok) {
    return { kind: "workerFrameInvalid", atMs, workerId, error: decoded.error };
  }
  const m = decoded.message;
  switch (m.type) {
    case "response_chunk":
      return {
        kind: "chunkReceived",
        atMs,
        workerId,
        requestId: m.request_id,
        chunk: m.chunk,
      };
    case "response_complete":
      return {
        kind: "completeReceived",
        atMs,
        workerId,
        requestId: m.request_id,
        statusCode: m.status_code,
        headers: m.headers ?? {},
        body: m.body ?? "",
        tokenCounts: m.token_counts ?? null,
        ...(m.body_base64 == null ? {} : { bodyBase64: m.body_base64 }),
      };
    case "response_head":
      return {
        kind: "headReceived",
        atMs,
        workerId,
        requestId: m.request_id,
        statusCode: m.status_code,
        headers: m.headers,
      };
    case "pong":
      return {
        kind: "pongReceived",
        atMs,
        workerId,
        currentLoad: m.current_load ?? null,
      };
    case "register":
      return {
        kind: "registerReceived",
        atMs,
        workerId,
        workerName: m.worker_name,
        models: m.models,
        maxConcurrent: m.max_concurrent,
        protocolVersion: m.protocol_version ?? null,
        currentLoad: m.current_load ?? 0,
        ...(m.extensions == null ? {} : { extensions: m.extensions }),
        ...(m.endpoint_prefixes == null
          ? {}
          : { endpointPrefixes: m.endpoint_prefixes }),
      };
    case "models_update":
      return {
        kind: "modelsUpdateReceived",
        atMs,
        workerId,
        models: m.models,
        currentLoad: m.current_load ?? null,
        ...(m.draining === true ? { draining: true } : {}),
      };
    case "error":
      return {
        kind: "workerErrorReceived",
        atMs,
        workerId,
        requestId: m.request_id ?? null,
        code: m.code ?? "worker_error",
        message: m.message,
      };
    case "capabilities":
      return {
        kind: "capabilitiesReceived",
        atMs,
        workerId,
        capabilities: m.capabilities,
      };
    case "residency":
      return {
        kind: "residencyReceived",
        atMs,
        workerId,
        loaded: m.loaded,
        loading: m.loading ?? [],
        room: m.room ?? null,
      };
    case "lifecycle_progress":
      return {
        kind: "lifecycleProgressReceived",
        atMs,
        workerId,
        taskId: m.task_id,
        status: m.status,
        progress: m.progress ?? null,
        error: m.error ?? null,
        result: m.result ?? null,
      };
  }
}

/**
 * Turns a worker's binary frame into a core event: a chunk-bytes-v1 chunk
 * (issue 18), its bytes a subarray of `frame`. Whether the worker may send one
 * is the core's question (onChunkReceived): from a worker that did not
 * negotiate the extension it is a protocol error, as any binary frame was (C41).
 * A frame over `maxBytes`, or whose header cannot be read, is a protocol error.
 */
export function eventFromBinaryFrame(
  workerId: WorkerId,
  atMs: number,
  frame: Uint8Array,
  maxBytes: number,
): Event {
  const decoded = decodeBinaryWorkerFrame(frame, maxBytes);
  if (!decoded.ok) {
    return { kind: "workerFrameInvalid", atMs, workerId, error: decoded.error };
  }
  return {
    kind: "chunkReceived",
    atMs,
    workerId,
    requestId: decoded.message.requestId,
    chunk: decoded.message.chunk,
  };
}
