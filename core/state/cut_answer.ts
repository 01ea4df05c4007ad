// Ending an answer before its end, for good (a cut): its size limit, the
// buffers full, a head the client cannot take, the cluster's data path. The
// worker is told to stop, the client gets its error, and the worker, one
// request lighter, may close (C28) or take its trial's next request.
import type { ClientError, Effect } from "../effect.ts";
import type { CancelReason } from "../protocol/messages.ts";
import { trialFreedByCancel } from "./backend_circuit.ts";
import { closeIfDrained } from "./drop_worker.ts";
import { cancelOnWorker, fail, pumpQueue } from "./requests.ts";
import type { Request, State, Worker } from "./state.ts";

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
