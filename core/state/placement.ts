// Hot first (issue 30.2): where a request for a model goes once workers report
// residency (residency.ts). The rule, as the README states it:
//
// 1. A free worker that holds the model (loaded) takes it: lowest load, ties
//    round-robin, cache affinity, `*` workers after exact ones, as before.
// 2. Else the request either waits for such a slot, joins a load already
//    under way on a free worker, or starts a load on a free worker that has
//    room, whichever is expected sooner:
//      wait  = (time until the model is loaded somewhere: 0 if it is)
//              + service time x requests for the model waiting (this one
//                included) / slots of the workers that hold or load it;
//      join  = what is left of that load (its measured load time minus the
//              time it has run);
//      load  = the model's measured load time (assumed `modelLoadMsAssumed`
//              until one is measured).
//    Ties go to joining, then waiting: a new load only when strictly sooner.
// 3. A load goes first to a worker with free room, else to one whose least
//    recently used model has nothing in flight there and no queued demand
//    (residency.ts `evictionFor`): a model still wanted is never evicted.
//    The one exception is the drain bound (issue 30.3): a worker that served
//    its resident models `modelDrainMax` times in a row while a model no
//    worker holds waited takes no more of them and lets its room go.
//
// Tenant fair share and priorities are the queue's (queue.ts): placement
// only says which worker, if any, may take a request for this model now.
import type { WorkerId } from "../vocabulary.ts";
import { type Need, workerAccepts } from "./accepts.ts";
import { bucketFirstWhere, type LoadBuckets } from "./load_buckets.ts";
import {
  evictionFor,
  heldByAny,
  loadMsEstimate,
  queuedFor,
  residencyOf,
  serviceMsEstimate,
  starvedModels,
  yieldsRoom,
} from "./residency.ts";
import type { State, Worker } from "./state.ts";
import { WILDCARD_MODEL } from "./workers.ts";

export type Placement =
  /** A free worker holding the model. */
  | { kind: "hot"; worker: Worker }
  /** A free worker already loading the model. */
  | { kind: "join"; worker: Worker }
  /** A free worker that will load it, unloading `evicting` (null: it has room). */
  | { kind: "load"; worker: Worker; evicting: string | null }
  /** Wait in the queue for a worker holding it. */
  | { kind: "wait" };

/** Every routable worker of `buckets` (exact first, then `*`) that passes `fits`, lowest load first. */
function firstOf(
  state: State,
  buckets: (LoadBuckets | undefined)[],
  fits: (w: Worker) => boolean,
): Worker | null {
  for (const b of buckets) {
    const id = bucketFirstWhere(b, (id) => {
      const w = state.workers.get(id);
      return w !== undefined && fits(w);
    });
    if (id !== null) return state.workers.get(id)!;
  }
  return null;
}

/** Expected wait for a free slot on a worker holding `model` (rule 2), Infinity when none holds or loads it. */
export function waitMsEstimate(
  state: State,
  provider: string,
  model: string,
  starved: Set<string>,
): number {
  let slots = 0;
  let readyInMs = Infinity;
  const loadMs = loadMsEstimate(state, provider, model);
  for (const id of state.modelIndex.get(provider)?.get(model) ?? []) {
    const w = state.workers.get(id);
    if (w === undefined || w.draining || w.backend.kind === "open") continue;
    const at = residencyOf(w, model);
    if (at === "loaded" && !yieldsRoom(state, w, starved)) {
      slots += w.maxConcurrent;
      readyInMs = 0;
    } else if (at === "loading") {
      slots += w.maxConcurrent;
      const since = w.residency!.loading.get(model)!;
      readyInMs = Math.min(
        readyInMs,
        Math.max(0, since + loadMs - state.nowMs),
      );
    }
  }
  if (slots === 0) return Infinity;
  const waiting = Math.max(1, queuedFor(state, provider, model));
  return readyInMs +
    serviceMsEstimate(state, provider, model) * waiting / slots;
}

/**
 * Where a request for `model` goes now (rules above). `avoid`: a worker the
 * request failed on (issue 14), passed over here.
 */
export function placeRequest(
  state: State,
  provider: string,
  model: string,
  cacheKey: string | null,
  need: Need | null,
  avoid: WorkerId | null,
  preferred: WorkerId | null,
  affinityMargin: number,
): Placement {
  const byKey = state.routes.get(provider);
  if (byKey === undefined) return { kind: "wait" };
  const buckets = [byKey.get(model), byKey.get(WILDCARD_MODEL)];
  const starved = starvedModels(state, provider);
  const usable = (w: Worker) => w.id !== avoid && workerAccepts(w, need);
  const holds = (w: Worker) =>
    usable(w) && residencyOf(w, model) === "loaded" &&
    !yieldsRoom(state, w, starved);
  const best = firstOf(state, buckets, holds);
  if (best !== null) {
    const p = preferred === null ? undefined : state.workers.get(preferred);
    const worker = cacheKey !== null && p !== undefined &&
        p.routeLevel !== null && best.routeLevel !== null && holds(p) &&
        (p.modelSet.has(model) || !best.modelSet.has(model)) &&
        p.routeLevel <= best.routeLevel + affinityMargin
      ? p
      : best;
    return { kind: "hot", worker };
  }
  const loadMs = loadMsEstimate(state, provider, model);
  let choice: Placement = { kind: "wait" };
  let soonest = waitMsEstimate(state, provider, model, starved);
  const joining = firstOf(
    state,
    buckets,
    (w) => usable(w) && residencyOf(w, model) === "loading",
  );
  if (joining !== null) {
    const since = joining.residency!.loading.get(model)!;
    const joinMs = Math.max(0, since + loadMs - state.nowMs);
    if (joinMs <= soonest) {
      choice = { kind: "join", worker: joining };
      soonest = joinMs;
    }
  }
  if (loadMs >= soonest) return choice;
  const cold = (w: Worker) =>
    usable(w) && residencyOf(w, model) === "available";
  const roomy = firstOf(
    state,
    buckets,
    (w) => cold(w) && evictionFor(state, w, false) === null,
  );
  if (roomy !== null) return { kind: "load", worker: roomy, evicting: null };
  let evicting: string | null = null;
  const held = heldByAny(state, provider, model);
  if (!held) starved.add(model);
  const swapper = firstOf(state, buckets, (w) => {
    if (!cold(w)) return false;
    // The drain bound gives room only to a model no worker holds (found by
    // the simulator: it once let a second copy of a held model evict demand).
    const victim = evictionFor(
      state,
      w,
      !held && yieldsRoom(state, w, starved),
    );
    if (typeof victim !== "string") return false;
    evicting = victim;
    return true;
  });
  return swapper === null
    ? choice
    : { kind: "load", worker: swapper, evicting };
}
