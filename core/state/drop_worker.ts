// Removing a worker from the registry (disconnect, heartbeat loss, drain end,
// protocol error): its in-flight requests are requeued or failed one by one (C22).
import type { ClientError, Effect } from "../effect.ts";
import type { CancelReason } from "../protocol/messages.ts";
import { trialFreedByCancel } from "./backend_circuit.ts";
import { refileResidency } from "./hot_routes.ts";
import { failWorkerLifecycleParts } from "./lifecycle.ts";
import { cancelOnWorker, fail, pumpQueue, requeueOrFail } from "./requests.ts";
import type { Request, State, Worker } from "./state.ts";
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

/**
 * A request was cut or cancelled on `worker` (undefined once it left): a
 * draining worker whose last request that was is idle now (C28), and a trial
 * slot the cut freed lets the queue move (backend circuit).
 */
export function releaseAfterCut(
  state: State,
  worker: Worker | undefined,
  out: Effect[],
): void {
  if (worker === undefined) return;
  closeIfDrained(state, worker, out);
  if (trialFreedByCancel(worker)) pumpQueue(state, worker.provider, out);
}

/**
 * Ends a request before its answer ended, never to be requeued (its answer
 * too large, the buffers full, a head the client cannot take, a cut on the
 * cluster's data path): a cancel to its worker, `why` logged, the client's
 * error, then the worker released (releaseAfterCut).
 */
export function cutAnswer(
  state: State,
  request: Request,
  workerId: string,
  cancel: CancelReason,
  error: ClientError,
  why: Effect | null,
  out: Effect[],
): void {
  const worker = state.workers.get(workerId);
  if (worker !== undefined) cancelOnWorker(state, worker, request, cancel, out);
  if (why !== null) out.push(why);
  fail(state, request, error, "failed", out);
  releaseAfterCut(state, worker, out);
}
