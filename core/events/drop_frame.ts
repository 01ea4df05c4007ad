// Frames the core drops. Those naming a request the sending worker does not
// hold (C20, C32): late after a cancel or an end (debug), or aimed at another
// worker's request (warn); and reports of an extension it did not negotiate.
import type { Effect } from "../effect.ts";
import { assignedRequest } from "../state/requests.ts";
import type { Request, State, Worker } from "../state/state.ts";

/**
 * The request a worker's frame names, if that worker holds it; otherwise the
 * frame is dropped (and logged) and there is none.
 */
export function requestOfFrame(
  state: State,
  e: { workerId: string; requestId: string },
  frame: string,
  out: Effect[],
): Request | undefined {
  const request = assignedRequest(state, e.workerId, e.requestId);
  if (request === undefined) {
    dropFrame(state, e.workerId, e.requestId, frame, out);
  }
  return request;
}

export function dropFrame(
  state: State,
  workerId: string,
  requestId: string,
  frame: string,
  out: Effect[],
): void {
  const request = state.requests.get(requestId);
  const foreign = request !== undefined &&
    (request.status.kind === "queued" || request.status.workerId !== workerId);
  out.push({
    kind: "log",
    level: foreign ? "warn" : "debug",
    message: foreign
      ? "frame for another worker's request dropped"
      : "late frame dropped",
    fields: { worker_id: workerId, request_id: requestId, frame },
  });
}

/**
 * A report of an extension its worker did not negotiate (capabilities-v1,
 * residency-v1) is ignored with a warning naming the extension: unlike a
 * frame about a request (C41), a stray report harms nothing. Whether it was.
 */
export function ignoredReport(
  worker: Worker,
  extension: string,
  message: string,
  out: Effect[],
): boolean {
  if (worker.extensions.includes(extension)) return false;
  out.push({
    kind: "log",
    level: "warn",
    message,
    fields: { worker_id: worker.id, extension },
  });
  return true;
}
