// Turns a worker's text frame into a core event. Decoding is pure, so the
// simulator feeds this very function garbage (C33).
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

/** A binary frame is a protocol error (C41). */
export function binaryFrameEvent(workerId: WorkerId, atMs: number): Event {
  return {
    kind: "workerFrameInvalid",
    atMs,
    workerId,
    error: {
      kind: "notJson",
      message: "binary frames are not part of the protocol",
    },
  };
}
