// response_complete (C14, C15, C44): ends the request with the worker's status,
// headers and body untouched, or acknowledges a cancel; either way the slot frees
// and the queue moves (C10).
import type { Effect } from "../effect.ts";
import { closeIfDrained } from "../state/drop_worker.ts";
import { assignedRequest, finish, pumpQueue } from "../state/requests.ts";
import type { State } from "../state/state.ts";
import { releaseSlot } from "../state/workers.ts";
import { dropFrame } from "./drop_frame.ts";
import type { Event } from "./event.ts";

type E = Extract<Event, { kind: "completeReceived" }>;

export function onCompleteReceived(state: State, e: E, out: Effect[]): void {
  const worker = state.workers.get(e.workerId);
  if (worker === undefined) return;
  if (worker.cancelling.has(e.requestId)) {
    releaseSlot(state, worker, e.requestId);
  } else {
    const request = assignedRequest(state, e.workerId, e.requestId);
    if (request === undefined) {
      return dropFrame(
        state,
        e.workerId,
        e.requestId,
        "response_complete",
        out,
      );
    }
    if (request.status.kind === "streaming") {
      if (e.body.length > 0) {
        out.push({ kind: "writeChunk", requestId: request.id, chunk: e.body });
      }
      out.push({ kind: "endStream", requestId: request.id, error: null });
    } else {
      out.push({
        kind: "respond",
        requestId: request.id,
        status: e.statusCode,
        headers: e.headers,
        body: request.bufferedBody.length > 0
          ? request.bufferedBody + e.body
          : e.body,
        queueWaitMs: request.queueWaitMs,
      });
    }
    finish(state, request, "completed", e.statusCode, out);
    releaseSlot(state, worker, e.requestId);
    out.push({
      kind: "log",
      level: "debug",
      message: "response complete",
      fields: {
        request_id: e.requestId,
        worker_id: worker.id,
        status: e.statusCode,
      },
    });
  }
  closeIfDrained(state, worker, out);
  pumpQueue(state, worker.provider, out);
}
