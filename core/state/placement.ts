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
// 4. A request never waits for a busy worker holding its model longer than a
//    load takes: once the longest-waiting request for the model has waited
//    that long, waiting is off the table and a load elsewhere may start
//    (re-decided on every tick). Waiting for a load under way is not cut.
//
// Tenant fair share and priorities are the queue's (queue.ts): placement
// only says which worker, if any, may take a request for this model now.
import type { WorkerId } from "../vocabulary.ts";
import { type Need, workerAccepts } from "./accepts.ts";
import { bucketFirstWhere, type LoadBuckets } from "./load_buckets.ts";
import { holdersOf } from "./hot_routes.ts";
import {
  evictionFor,
  hasPlainWorkers,
  heldByAny,
  loadMsEstimate,
  oldestQueuedAtMs,
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

/** The first routable worker of `buckets` (exact first, then `*`) that passes `fits`, lowest load first. */
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

/** Of two candidates, the less loaded; a tie to the first. */
function lessLoaded(a: Worker | null, b: Worker | null): Worker | null {
  if (a === null || b === null) return a ?? b;
  return b.routeLevel! < a.routeLevel! ? b : a;
}

/** Workers that hold or load `model`: those that report it, and (mid-upgrade) those that report nothing. */
function* holdersAndPlain(
  state: State,
  provider: string,
  model: string,
): Iterable<Worker> {
  for (const id of holdersOf(state, provider, model)) {
    const w = state.workers.get(id);
    if (w !== undefined) yield w;
  }
  if (!hasPlainWorkers(state)) return;
  for (const id of state.modelIndex.get(provider)?.get(model) ?? []) {
    const w = state.workers.get(id);
    if (w !== undefined && w.residency === null) yield w;
  }
}

/** Expected wait for a free slot on a worker holding `model` (rule 2), Infinity when none holds or loads it. */
export function waitMsEstimate(
  state: State,
  provider: string,
  model: string,
  starved: () => Set<string>,
  /**
   * A worker the request avoids (its scoped error, issue 14): its slots are
   * not waited for (found by models-edge's e2e with real routers: a request
   * sent back by its only holder waited for it until its queue timeout).
   */
  avoid: WorkerId | null = null,
): number {
  let slots = 0;
  let readyInMs = Infinity;
  const loadMs = loadMsEstimate(state, provider, model);
  for (const w of holdersAndPlain(state, provider, model)) {
    if (w.draining || w.backend.kind === "open" || w.id === avoid) continue;
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

/** Whether a worker holds `model` loaded (busy or not): waiting is for its slots, not for a load. */
function loadedSomewhere(
  state: State,
  provider: string,
  model: string,
): boolean {
  for (const w of holdersAndPlain(state, provider, model)) {
    if (residencyOf(w, model) === "loaded") return true;
  }
  return false;
}

/** Computed once, on first use: most placements never need it. */
function lazy<T>(f: () => T): () => T {
  let value: T | undefined;
  let done = false;
  return () => {
    if (!done) {
      value = f();
      done = true;
    }
    return value as T;
  };
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
  const starved = lazy(() => starvedModels(state, provider));
  const usable = (w: Worker) => w.id !== avoid && workerAccepts(w, need);
  const holds = (w: Worker) =>
    usable(w) && residencyOf(w, model) === "loaded" &&
    !yieldsRoom(state, w, starved);
  // Hot: the reporting holders (indexed), and workers that report nothing
  // (they count as holding every model they acked), exact before `*` (C42).
  const reporting = firstOf(
    state,
    [state.hotRoutes.get(provider)?.get(model)],
    holds,
  );
  const plain = hasPlainWorkers(state);
  const plainOf = (key: string) =>
    plain
      ? firstOf(
        state,
        [byKey.get(key)],
        (w) => w.residency === null && holds(w),
      )
      : null;
  const best = lessLoaded(reporting, plainOf(model)) ??
    plainOf(WILDCARD_MODEL);
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
  let soonest = waitMsEstimate(state, provider, model, starved, avoid);
  // Rule 4, the bound on waiting (ski rental): once a request has waited
  // for a busy worker holding its model as long as a load takes, the
  // estimate was wrong (those slots run longer requests, of this model or
  // another), and it stops waiting for them: at most twice the better choice.
  const since = oldestQueuedAtMs(state, provider, model);
  if (
    since !== null && state.nowMs - since >= loadMs &&
    loadedSomewhere(state, provider, model)
  ) soonest = Infinity;
  let joining: Worker | null = null;
  for (const id of holdersOf(state, provider, model)) {
    const w = state.workers.get(id);
    if (
      w === undefined || w.routeLevel === null || !usable(w) ||
      residencyOf(w, model) !== "loading"
    ) continue;
    if (joining === null || w.routeLevel < joining.routeLevel!) joining = w;
  }
  if (joining !== null) {
    const since = joining.residency!.loading.get(model)!;
    const joinMs = Math.max(0, since + loadMs - state.nowMs);
    if (joinMs <= soonest) {
      choice = { kind: "join", worker: joining };
      soonest = joinMs;
    }
  }
  if (loadMs >= soonest) return choice;
  // A load: the fleet is scanned for room, lowest load first. Only when a
  // load is the sooner way, so a fleet that holds what it is asked for
  // never pays for it.
  const buckets = [byKey.get(model), byKey.get(WILDCARD_MODEL)];
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
  const swapper = firstOf(state, buckets, (w) => {
    if (!cold(w)) return false;
    // The drain bound gives room only to a model no worker holds (found by
    // the simulator: it once let a second copy of a held model evict demand).
    const victim = evictionFor(
      state,
      w,
      !held && yieldsRoom(state, w, () => starved().add(model)),
    );
    if (typeof victim !== "string") return false;
    evicting = victim;
    return true;
  });
  return swapper === null
    ? choice
    : { kind: "load", worker: swapper, evicting };
}
