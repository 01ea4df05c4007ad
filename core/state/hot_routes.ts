// Indexes of residency (issue 30), so hot-first routing stays sub-linear in the
// fleet's size (issue 3) as `routes` does for load: `hotRoutes` files each
// routable worker that reported residency under the models it holds loaded,
// by load level (the same LoadBuckets, the same round-robin); `holders` lists,
// per model, the workers holding or loading it, whatever their load. Both are
// kept in step by `refileResidency`, called after every change of a worker's
// residency or load level.
import type { WorkerId } from "../vocabulary.ts";
import {
  bucketAdd,
  bucketForget,
  bucketPark,
  bucketsEmpty,
  emptyBuckets,
  type LoadBuckets,
} from "./load_buckets.ts";
import type { Residency, State, Worker } from "./state.ts";

export function holdersKey(provider: string, model: string): string {
  return `${provider}\u0000${model}`;
}

/** Workers that reported residency and hold or load `model`. */
export function holdersOf(
  state: State,
  provider: string,
  model: string,
): ReadonlySet<WorkerId> {
  return state.holders.get(holdersKey(provider, model)) ?? NONE;
}

const NONE: ReadonlySet<WorkerId> = new Set();

function canServe(worker: Worker, model: string): boolean {
  return worker.wildcard || worker.modelSet.has(model);
}

function hotBuckets(state: State, provider: string, model: string) {
  let byModel = state.hotRoutes.get(provider);
  if (byModel === undefined) {
    byModel = new Map();
    state.hotRoutes.set(provider, byModel);
  }
  let b = byModel.get(model);
  if (b === undefined) {
    b = emptyBuckets();
    byModel.set(model, b);
  }
  return b;
}

/** Takes the worker out of `model`'s hot buckets: parked (it may come back at another level) or forgotten. */
function unfileHot(
  state: State,
  worker: Worker,
  model: string,
  park: boolean,
): void {
  const byModel = state.hotRoutes.get(worker.provider);
  const b: LoadBuckets | undefined = byModel?.get(model);
  if (byModel === undefined || b === undefined) return;
  if (park) bucketPark(b, worker.id);
  else bucketForget(b, worker.id);
  if (bucketsEmpty(b)) byModel.delete(model);
}

/** Whether `held` is exactly the models of `maps` the worker can serve (no allocation: the common case). */
function sameModels(
  worker: Worker,
  held: ReadonlySet<string>,
  maps: readonly ReadonlyMap<string, number>[],
): boolean {
  let n = 0;
  for (const map of maps) {
    for (const m of map.keys()) {
      if (!canServe(worker, m)) continue;
      if (!held.has(m)) return false;
      n++;
    }
  }
  return n === held.size;
}

function syncHolders(
  state: State,
  worker: Worker,
  r: Residency,
  gone: boolean,
): void {
  const held = new Set<string>();
  if (!gone) {
    for (const m of r.loaded.keys()) if (canServe(worker, m)) held.add(m);
    for (const m of r.loading.keys()) if (canServe(worker, m)) held.add(m);
  }
  for (const m of r.held) {
    if (held.has(m)) continue;
    const key = holdersKey(worker.provider, m);
    const set = state.holders.get(key);
    set?.delete(worker.id);
    if (set !== undefined && set.size === 0) state.holders.delete(key);
  }
  for (const m of held) {
    if (r.held.has(m)) continue;
    const key = holdersKey(worker.provider, m);
    let set = state.holders.get(key);
    if (set === undefined) {
      set = new Set();
      state.holders.set(key, set);
    }
    set.add(worker.id);
  }
  r.held = held;
}

/**
 * Files the worker under what it holds now, at its load level now (out of
 * `hotRoutes` when it cannot take work, out of both when it is gone). Models
 * whose filing did not change keep their place in the round-robin. Called on
 * every dispatch and release, so the usual case (same models, another level)
 * allocates nothing.
 */
export function refileResidency(state: State, worker: Worker): void {
  const r = worker.residency;
  if (r === null) return;
  const gone = state.workers.get(worker.id) !== worker;
  if (gone || !sameModels(worker, r.held, [r.loaded, r.loading])) {
    syncHolders(state, worker, r, gone);
  }
  const level = gone ? null : worker.routeLevel;
  const filed = r.filed;
  if (
    !gone && filed !== null && sameModels(worker, filed.models, [r.loaded])
  ) {
    // Same models, another level (or parked while it cannot take work): the
    // buckets relink its nodes, so a busy worker of a large fleet costs O(1).
    if (filed.level === level) return;
    for (const m of filed.models) {
      if (level === null) unfileHot(state, worker, m, true);
      else bucketAdd(hotBuckets(state, worker.provider, m), level, worker.id);
    }
    filed.level = level;
    return;
  }
  if (filed !== null) {
    for (const m of filed.models) unfileHot(state, worker, m, false);
    r.filed = null;
  }
  if (level === null) return;
  const hot = new Set<string>();
  for (const m of r.loaded.keys()) {
    if (!canServe(worker, m)) continue;
    hot.add(m);
    bucketAdd(hotBuckets(state, worker.provider, m), level, worker.id);
  }
  if (hot.size > 0) r.filed = { level, models: hot };
}
