// Frames naming a request the sending worker does not hold are dropped (C20, C32):
// late after a cancel or an end (debug), or aimed at another worker's request (warn).
import type { Effect } from "../effect.ts";
import type { State } from "../state/state.ts";

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
