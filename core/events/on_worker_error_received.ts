// `error` from a worker (C27, C40). Scoped to a request it holds: the request is
// requeued if it can be (not streamed yet, requeues left), else it fails with a
// 502 carrying the worker's message. It also acknowledges a cancel (C44).
// Unscoped: logged only.
//
// Issue 14: a scoped error means "this request did not start here, try
// elsewhere" (`backend_unavailable`: the backend refused the connection;
// `worker_draining`: the worker just began draining), so the requeue prefers
// another worker, and repeated `backend_unavailable` opens the worker's backend
// circuit (backend_circuit.ts).
import { relayedWorkerError } from "../protocol/errors.ts";
import type { Effect } from "../effect.ts";
import { recordBackendFailure } from "../state/backend_circuit.ts";
import { closeIfDrained } from "../state/drop_worker.ts";
import { fail, pumpQueue, requeueOrFail } from "../state/requests.ts";
import type { State } from "../state/state.ts";
import { releaseSlot } from "../state/workers.ts";
import { requestOfFrame } from "./drop_frame.ts";
import type { Event } from "./event.ts";

type E = Extract<Event, { kind: "workerErrorReceived" }>;

/** The scoped error code of a backend that refused the request before any byte. */
export const BACKEND_UNAVAILABLE = "backend_unavailable";

export function onWorkerErrorReceived(state: State, e: E, out: Effect[]): void {
  const worker = state.workers.get(e.workerId);
  if (worker === undefined) return;
  out.push({
    kind: "log",
    level: "warn",
    message: "worker error",
    fields: {
      worker_id: e.workerId,
      request_id: e.requestId ?? "",
      code: e.code,
      error: e.message,
    },
  });
  if (e.requestId === null) return;
  if (worker.cancelling.has(e.requestId)) {
    releaseSlot(state, worker, e.requestId);
  } else {
    const frame = { workerId: e.workerId, requestId: e.requestId };
    const request = requestOfFrame(state, frame, "error", out);
    if (request === undefined) return;
    if (request.status.kind === "streaming") {
      releaseSlot(state, worker, request.id);
      const error = relayedWorkerError(e.code, e.message);
      fail(state, request, error, "failed", out);
    } else {
      requeueOrFail(
        state,
        worker,
        request,
        `worker error: ${e.message}`,
        out,
        true,
      );
    }
    if (e.code === BACKEND_UNAVAILABLE) {
      recordBackendFailure(state, worker, out);
    }
  }
  closeIfDrained(state, worker, out);
  pumpQueue(state, worker.provider, out);
}
