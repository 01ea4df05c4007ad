// The per-provider bounded queue (C9, C10, C12) with spec 004 scheduling. Every
// rule about "which queued request goes next" lives in `nextToDispatch`:
//
// 1. Only requests a worker is free for right now are candidates (FIFO among
//    *compatible* requests, C9/C10).
// 2. Priority classes by stride scheduling with weights high 8 : normal 4 : low 1
//    (config). A class that has waited the least "virtual time" goes next, ties to
//    the higher class. When all classes wait, high gets 8 dispatches for each low
//    one: low is slower but never starved, and unlike aging it needs no clock and
//    gives a hard bound (while low stays dispatchable, at most (8+1) + (4+1) = 14
//    dispatches of other classes pass before a low one; the +1s are ties, which go
//    to the higher class). A class that was empty, or could not be served because
//    no worker was free for it, moves up to the current virtual time, so it cannot
//    bank credit while idle.
// 3. Within a class, tenants take turns (round-robin over tenants with a
//    dispatchable request): one tenant's burst of a thousand cannot hold another
//    tenant's single request back by more than one dispatch per other waiting
//    tenant in that class.
// 4. Within a tenant, the oldest compatible request (enqueueSeq, kept across
//    requeues, C22).
import type { Priority, RequestId } from "../vocabulary.ts";
import { pickWorker, pickWorkerExcept } from "./routing.ts";
import { needOf, workerAccepts } from "./accepts.ts";
import { otherWorkerServes } from "./workers.ts";
import { otherWorkerHolds, placeAvoiding } from "./placement.ts";
import { residencyOf } from "./residency.ts";
import type {
  ProviderQueue,
  Request,
  State,
  TenantLane,
  Worker,
} from "./state.ts";

const CLASSES: readonly Priority[] = ["high", "normal", "low"];

export function queueOf(state: State, provider: string): ProviderQueue {
  const q = state.queues.get(provider);
  if (q === undefined) throw new Error(`No queue for provider "${provider}"`);
  return q;
}

export function queueIsFull(state: State, provider: string): boolean {
  return queueOf(state, provider).length >= state.config.queueLenMax;
}

export function tenantQueueIsFull(
  state: State,
  provider: string,
  tenant: string,
): boolean {
  return (queueOf(state, provider).tenants.get(tenant) ?? 0) >=
    state.config.tenantQueueLenMax;
}

/**
 * Issue 33: the share of QUEUE_LEN_MAX a model with no connected worker may
 * hold (one whose only worker left, waiting out MODEL_GRACE_SECS), so that its
 * requests, which cannot move until a worker returns, never fill the queue the
 * live models share.
 */
export const WORKERLESS_QUEUE_SHARE = 0.25;

/** How many requests a model with no connected worker may hold in the queue (at least 1). */
export function workerlessQueueMax(state: State): number {
  return Math.max(
    1,
    Math.floor(state.config.queueLenMax * WORKERLESS_QUEUE_SHARE),
  );
}

/** Whether `model`'s requests already hold all a workerless model may hold. */
export function workerlessModelQueueIsFull(
  state: State,
  provider: string,
  model: string,
): boolean {
  return (queueOf(state, provider).models.get(model) ?? 0) >=
    workerlessQueueMax(state);
}

/** Whether requests for this model already wait (a newcomer must queue behind them). */
export function modelQueued(
  state: State,
  provider: string,
  model: string,
): boolean {
  return queueOf(state, provider).models.has(model);
}

function bump(map: Map<string, number>, key: string, by: number): void {
  const n = (map.get(key) ?? 0) + by;
  if (n <= 0) map.delete(key);
  else map.set(key, n);
}

/**
 * Puts a request in its lane at the place its `enqueueSeq` gives it: the end for a
 * new request, nearer the front for a requeued one, which keeps its place (C22).
 */
export function enqueue(state: State, request: Request): void {
  const q = queueOf(state, request.provider);
  const cls = q.classes[request.priority];
  if (cls.length === 0 && cls.pass < q.vnow) cls.pass = q.vnow;
  let lane = cls.tenants.get(request.tenant);
  if (lane === undefined) {
    lane = { length: 0, byModel: new Map() };
    cls.tenants.set(request.tenant, lane);
  }
  let list = lane.byModel.get(request.model);
  if (list === undefined) {
    list = [];
    lane.byModel.set(request.model, list);
  }
  let i = list.length;
  while (i > 0) {
    const prev = state.requests.get(list[i - 1]!);
    if (prev === undefined || prev.enqueueSeq < request.enqueueSeq) break;
    i--;
  }
  if (i === list.length) list.push(request.id);
  else list.splice(i, 0, request.id);
  lane.length++;
  cls.length++;
  q.length++;
  bump(q.models, request.model, 1);
  bump(q.tenants, request.tenant, 1);
}

/** Removes a queued request (timeout, client gone, dispatch); false if it was not queued. */
export function dequeue(state: State, request: Request): boolean {
  const q = queueOf(state, request.provider);
  const cls = q.classes[request.priority];
  const lane = cls.tenants.get(request.tenant);
  const list = lane?.byModel.get(request.model);
  if (lane === undefined || list === undefined) return false;
  const i = list[0] === request.id ? 0 : list.indexOf(request.id);
  if (i < 0) return false;
  if (i === 0) list.shift();
  else list.splice(i, 1);
  if (list.length === 0) lane.byModel.delete(request.model);
  if (--lane.length === 0) cls.tenants.delete(request.tenant);
  cls.length--;
  q.length--;
  bump(q.models, request.model, -1);
  bump(q.tenants, request.tenant, -1);
  return true;
}

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/**
 * A class's step of virtual time per dispatch: 1/weight, scaled by the weights'
 * least common multiple when they are integers, so passes add up exactly and
 * ties go to the higher class as intended (with 1/6 summed in floats, six steps
 * fall short of 1 and a 6:1 class got 7 dispatches; found by the simulator).
 */
function stride(weights: Record<Priority, number>, priority: Priority): number {
  const { high, normal, low } = weights;
  if ([high, normal, low].every((w) => Number.isSafeInteger(w) && w > 0)) {
    const hn = (high / gcd(high, normal)) * normal;
    const lcm = (hn / gcd(hn, low)) * low;
    if (lcm <= 0x7fff_ffff) return lcm / weights[priority];
  }
  return 1 / weights[priority];
}

/** Accounts a dispatch from the queue: the class's virtual time moves, the tenant's turn ends. */
export function markServed(state: State, request: Request): void {
  const q = queueOf(state, request.provider);
  const cls = q.classes[request.priority];
  q.vnow = cls.pass;
  // The served class had the least pass among dispatchable ones, so a class behind
  // it could not be served (empty, or no free worker for its requests): lift it to
  // the virtual time, so it banks no credit to burst ahead of a higher class later
  // (found by the simulator, sim/scenarios/regressions.ts). `vnow` stays monotone.
  for (const other of CLASSES) {
    const c = q.classes[other];
    if (c.pass < q.vnow) c.pass = q.vnow;
  }
  cls.pass += stride(state.config.priorityWeights, request.priority);
  const lane = cls.tenants.get(request.tenant);
  if (lane !== undefined) {
    cls.tenants.delete(request.tenant);
    cls.tenants.set(request.tenant, lane);
  }
}

/**
 * The worker a queued request may go to now. A request sent back by a worker's
 * scoped error avoids that worker while another one serves the model (it waits
 * for that one), and goes back to it only when it is the only one (issue 14).
 * With residency (issue 30), when the avoided worker holds the model, "serves"
 * means holds or loads it.
 */
function workerFor(
  state: State,
  request: Request,
  free: Map<string, Worker>,
): Worker | null {
  const any = free.get(request.model);
  if (any === undefined) return null;
  // Issue 25: only a worker that takes this request's path and body.
  const need = needOf(request);
  const best = workerAccepts(any, need)
    ? any
    : pickWorker(state, request.provider, request.model, null, need);
  if (best === null) return null;
  const chosen = pickWorker(
    state,
    request.provider,
    request.model,
    request.cacheKey,
    need,
  ) ?? best;
  const avoid = request.avoidWorkerId;
  if (avoid === null || chosen.id !== avoid) return chosen;
  // Issue 30: refused by a worker that holds the model, "another worker serves
  // it" means one holds or loads the model, not one that merely lists it, and
  // no load starts for it (placement.ts placeAvoiding).
  const byResidency = state.residencyWorkers > 0 &&
    residencyOf(chosen, request.model) === "loaded";
  const { provider, model } = request;
  const other = byResidency
    ? placeAvoiding(state, provider, model, need, avoid)
    : pickWorkerExcept(state, provider, model, avoid, need);
  if (other !== null) return other;
  const anotherServes = byResidency
    ? otherWorkerHolds(state, provider, model, avoid, need)
    : otherWorkerServes(state, provider, model, avoid, need);
  return anotherServes ? null : best;
}

function oldestDispatchable(
  state: State,
  lane: TenantLane,
  free: Map<string, Worker>,
): { request: Request; worker: Worker } | null {
  let best: { request: Request; worker: Worker } | null = null;
  for (const [model, list] of lane.byModel) {
    if (!free.has(model)) continue;
    // The oldest request that may go now: only requests waiting for another
    // worker than the free one are passed over (a request without
    // avoidWorkerId always may), so this looks past a few at most.
    for (const id of list) {
      const r = state.requests.get(id);
      if (r === undefined) continue;
      if (best !== null && r.enqueueSeq >= best.request.enqueueSeq) break;
      const worker = workerFor(state, r, free);
      if (worker !== null) {
        best = { request: r, worker };
        break;
      }
    }
  }
  return best;
}

/** The next queued request to dispatch and the worker it goes to, or null. */
export function nextToDispatch(
  state: State,
  provider: string,
): { request: Request; worker: Worker } | null {
  const q = queueOf(state, provider);
  if (q.length === 0) return null;
  const free = new Map<string, Worker>();
  for (const model of q.models.keys()) {
    const w = pickWorker(state, provider, model, null);
    if (w !== null) free.set(model, w);
  }
  if (free.size === 0) return null;
  let chosen: { request: Request; worker: Worker } | null = null;
  let chosenPass = Infinity;
  for (const priority of CLASSES) {
    const cls = q.classes[priority];
    if (cls.length === 0 || cls.pass >= chosenPass) continue;
    for (const lane of cls.tenants.values()) {
      const r = oldestDispatchable(state, lane, free);
      if (r === null) continue;
      chosen = r;
      chosenPass = cls.pass;
      break;
    }
  }
  return chosen;
}

/** Queued request ids in enqueue order (tests, admin views). */
export function queuedIds(state: State, provider: string): RequestId[] {
  const out: RequestId[] = [];
  for (const cls of Object.values(queueOf(state, provider).classes)) {
    for (const lane of cls.tenants.values()) {
      for (const list of lane.byModel.values()) out.push(...list);
    }
  }
  const seq = (id: RequestId) => state.requests.get(id)?.enqueueSeq ?? 0;
  return out.sort((a, b) => seq(a) - seq(b));
}
