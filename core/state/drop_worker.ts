// Removing a worker from the registry (disconnect, heartbeat loss, drain end,
// protocol error): its in-flight requests are requeued or failed one by one (C22).
import type { Effect } from "../effect.ts";
import { refileResidency } from "./hot_routes.ts";
import { failWorkerLifecycleParts } from "./lifecycle.ts";
import { pumpQueue, requeueOrFail } from "./requests.ts";
import type { State, Worker } from "./state.ts";
import { unindexWorker } from "./workers.ts";

export function dropWorker(
  state: State,
  worker: Worker,
  cause: string,
  out: Effect[],
): void {
  unindexWorker(state, worker);
  state.workers.delete(worker.id);
  if (worker.residency !== null) {
    state.residencyWorkers--;
    refileResidency(state, worker);
  }
  for (const requestId of [...worker.inFlight]) {
    const request = state.requests.get(requestId);
    if (request === undefined) continue;
    requeueOrFail(state, worker, request, cause, out);
  }
  worker.inFlight.clear();
  worker.cancelling.clear();
  failWorkerLifecycleParts(state, worker.id, cause, out);
  pumpQueue(state, worker.provider, out);
}

/** Closes the worker and drops it in one step; a later socket close event finds nothing. */
export function closeAndDrop(
  state: State,
  worker: Worker,
  code: number,
  reason: string,
  out: Effect[],
): void {
  out.push({ kind: "closeWorker", workerId: worker.id, code, reason });
  dropWorker(state, worker, reason, out);
}

/**
 * A draining worker with nothing in flight is closed (C28); one that drains
 * itself (drain-v1) closes its own socket once its answers are sent.
 */
export function closeIfDrained(
  state: State,
  worker: Worker,
  out: Effect[],
): void {
  if (!worker.draining || worker.selfDraining || worker.inFlight.size > 0) {
    return;
  }
  out.push({
    kind: "log",
    level: "info",
    message: "worker drained",
    fields: { worker_id: worker.id, worker_name: worker.name },
  });
  closeAndDrop(state, worker, 1000, "worker drained", out);
}
