// The per-provider bounded queue (C9, C10, C12). One FIFO per model, each kept in
// `enqueueSeq` order, so "the oldest request a free worker can serve" is the
// smallest head among the models that have a free worker. `nextToDispatch` is the
// single place that decides which queued request goes next: per-tenant fair
// queueing and priorities (spec 004) replace that function and nothing else.
import type { RequestId } from "../events/event.ts";
import { pickWorker } from "./routing.ts";
import type { ProviderQueue, Request, State, Worker } from "./state.ts";

export function queueOf(state: State, provider: string): ProviderQueue {
  const q = state.queues.get(provider);
  if (q === undefined) throw new Error(`No queue for provider "${provider}"`);
  return q;
}

export function queueIsFull(state: State, provider: string): boolean {
  return queueOf(state, provider).length >= state.config.queueLenMax;
}

/**
 * Puts a request in its model's FIFO at the place its `enqueueSeq` gives it:
 * the end for a new request, nearer the front for a requeued one, which keeps
 * its original place (C22).
 */
export function enqueue(state: State, request: Request): void {
  const q = queueOf(state, request.provider);
  let list = q.byModel.get(request.model);
  if (list === undefined) {
    list = [];
    q.byModel.set(request.model, list);
  }
  let i = list.length;
  while (i > 0) {
    const prev = state.requests.get(list[i - 1]!);
    if (prev === undefined || prev.enqueueSeq < request.enqueueSeq) break;
    i--;
  }
  if (i === list.length) list.push(request.id);
  else list.splice(i, 0, request.id);
  q.length++;
}

/** Removes a queued request (timeout, client gone, dispatch). */
export function dequeue(state: State, request: Request): void {
  const q = queueOf(state, request.provider);
  const list = q.byModel.get(request.model);
  if (list === undefined) return;
  const i = list[0] === request.id ? 0 : list.indexOf(request.id);
  if (i < 0) return;
  if (i === 0) list.shift();
  else list.splice(i, 1);
  q.length--;
  if (list.length === 0) q.byModel.delete(request.model);
}

/**
 * The next queued request to dispatch and the worker it goes to: the oldest
 * (smallest enqueueSeq) among requests for which some worker is free (C10).
 */
export function nextToDispatch(
  state: State,
  provider: string,
): { request: Request; worker: Worker } | null {
  const q = queueOf(state, provider);
  let best: { request: Request; worker: Worker } | null = null;
  for (const [model, list] of q.byModel) {
    const head = list[0];
    if (head === undefined) continue;
    const request = state.requests.get(head);
    if (request === undefined) continue;
    if (best !== null && best.request.enqueueSeq < request.enqueueSeq) continue;
    const worker = pickWorker(state, provider, model);
    if (worker !== null) best = { request, worker };
  }
  return best;
}

export function queuedIds(state: State, provider: string): RequestId[] {
  const out: RequestId[] = [];
  for (const list of queueOf(state, provider).byModel.values()) {
    out.push(...list);
  }
  return out;
}
