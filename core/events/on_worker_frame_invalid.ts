// A malformed, unknown, binary or oversized frame (C33, C41): the offending worker
// is closed with a protocol error (1002); its requests are requeued like on any
// disconnect. Nothing else is touched and nothing throws.
//
// Issue 14: an oversized answer (a worker without body-chunks-v1, e.g. the
// original) whose request id can be read from the frame's start fails only that
// request, 502 `response_too_large`, and is never requeued: closing the socket
// would requeue it, and the next worker would send the same oversized answer.
import { apiError } from "../protocol/errors.ts";
import type { Effect } from "../effect.ts";
import type { OversizedFrame } from "../protocol/decode.ts";
import { closeAndDrop, closeIfDrained } from "../state/drop_worker.ts";
import {
  assignedRequest,
  cancelOnWorker,
  fail,
  pumpQueue,
} from "../state/requests.ts";
import type { State } from "../state/state.ts";
import { releaseSlot } from "../state/workers.ts";
import type { Event } from "./event.ts";

type E = Extract<Event, { kind: "workerFrameInvalid" }>;

export function protocolViolation(
  state: State,
  workerId: string,
  reason: string,
  out: Effect[],
): void {
  out.push({
    kind: "log",
    level: "warn",
    message: "protocol error",
    fields: { worker_id: workerId, reason },
  });
  const worker = state.workers.get(workerId);
  if (worker !== undefined) {
    return closeAndDrop(state, worker, 1002, `protocol error: ${reason}`, out);
  }
  if (state.pending.delete(workerId)) {
    out.push({
      kind: "closeWorker",
      workerId,
      code: 1002,
      reason: `protocol error: ${reason}`,
    });
  }
}

/** Fails the request an oversized answer belongs to; false when it is not this worker's. */
function failOversized(
  state: State,
  workerId: string,
  frame: OversizedFrame,
  message: string,
  out: Effect[],
): boolean {
  const worker = state.workers.get(workerId);
  if (worker === undefined) return false;
  if (worker.cancelling.has(frame.requestId)) {
    // An answer to a request already ended here: only its slot is left, and
    // freeing it moves the queue as any acknowledgment does (C44, C10).
    if (frame.type === "response_complete") {
      releaseSlot(state, worker, frame.requestId);
      closeIfDrained(state, worker, out);
      pumpQueue(state, worker.provider, out);
    }
    return true;
  }
  const request = assignedRequest(state, workerId, frame.requestId);
  if (request === undefined) return false;
  out.push({
    kind: "log",
    level: "warn",
    message: "response too large",
    fields: { worker_id: workerId, request_id: request.id, reason: message },
  });
  if (frame.type === "response_complete") {
    releaseSlot(state, worker, request.id); // the worker is done with it
  } else {
    cancelOnWorker(
      state,
      worker,
      request,
      { other: "response_too_large" },
      out,
    );
  }
  fail(
    state,
    request,
    apiError("response_too_large", {
      limit: state.config.frameCharsMax,
      unit: "characters",
      of: "in one worker frame",
    }),
    "failed",
    out,
  );
  closeIfDrained(state, worker, out);
  pumpQueue(state, worker.provider, out);
  return true;
}

export function onWorkerFrameInvalid(state: State, e: E, out: Effect[]): void {
  const oversized = e.error.oversized;
  if (
    oversized !== undefined &&
    failOversized(state, e.workerId, oversized, e.error.message, out)
  ) return;
  protocolViolation(state, e.workerId, e.error.message, out);
}
