// Worker choice (C7, C8, C42): among workers that acked the exact model, are not
// draining and have a free slot, the lowest load wins; among equally loaded ones,
// the worker that has waited longest at that load, which is round-robin over tied
// workers (C50). Workers that advertised `*` are considered only when no exact
// match is free. `routes` keeps routable workers by load level (load_buckets.ts),
// so the choice costs O(load levels), not a scan of the workers.
//
// Cache affinity (spec 004, X-Cache-Tag / prompt_cache_key / user): a request with
// a cache key prefers the worker that served that key last, so its prefix/KV cache
// is reused, unless that worker is busier than the least-loaded one by more than
// `affinityLoadMargin` (the load guard of vllm-router's cache-aware policy).
//
// Issue 25: a request may also need a worker whose endpoint_prefixes match its
// path, or that can carry a body that is not text (accepts.ts). Such a `need`
// looks further along the same buckets, lowest load first; without one (every
// worker of a model accepts every path, as before) the first worker is taken.
//
// Issue 30: once workers report which models they hold, placement.ts decides
// instead (hot first); without any report this file's rules stand unchanged.
import type { WorkerId } from "../vocabulary.ts";
import { type Need, workerAccepts } from "./accepts.ts";
import {
  bucketFirst,
  bucketFirstExcept,
  bucketFirstWhere,
  type LoadBuckets,
} from "./load_buckets.ts";
import { type Placement, placeRequest } from "./placement.ts";
import type { State, Worker } from "./state.ts";
import { WILDCARD_MODEL, workerCanServe } from "./workers.ts";

export function affinityKey(
  provider: string,
  model: string,
  cacheKey: string,
): string {
  return `${provider}\u0000${model}\u0000${cacheKey}`;
}

/** The least-loaded worker of `b` that meets `need` (any when null), else null. */
function firstFit(
  state: State,
  b: LoadBuckets | undefined,
  need: Need | null,
  avoid: WorkerId | null = null,
): WorkerId | null {
  if (need === null) {
    return avoid === null ? bucketFirst(b) : bucketFirstExcept(b, avoid);
  }
  return bucketFirstWhere(b, (id) => {
    if (id === avoid) return false;
    const w = state.workers.get(id);
    return w !== undefined && workerAccepts(w, need);
  });
}

function placed(p: Placement): Worker | null {
  return p.kind === "wait" ? null : p.worker;
}

/**
 * The worker a request for `model` should go to now, or null when none is
 * free. Once any worker reports residency (issue 30), placement.ts decides:
 * hot first, then wait, join or load, whichever is expected sooner.
 */
export function pickWorker(
  state: State,
  provider: string,
  model: string,
  cacheKey: string | null = null,
  need: Need | null = null,
): Worker | null {
  if (state.residencyWorkers > 0) {
    const preferred = cacheKey === null
      ? null
      : state.affinity.get(affinityKey(provider, model, cacheKey)) ?? null;
    return placed(placeRequest(
      state,
      provider,
      model,
      cacheKey,
      need,
      null,
      preferred,
      state.config.affinityLoadMargin,
    ));
  }
  const byKey = state.routes.get(provider);
  if (byKey === undefined) return null;
  const id = firstFit(state, byKey.get(model), need) ??
    firstFit(state, byKey.get(WILDCARD_MODEL), need);
  const best = id === null ? undefined : state.workers.get(id);
  if (best === undefined) return null;
  if (cacheKey === null) return best;
  const preferredId = state.affinity.get(
    affinityKey(provider, model, cacheKey),
  );
  const preferred = preferredId === undefined
    ? undefined
    : state.workers.get(preferredId);
  if (
    preferred !== undefined && preferred.routeLevel !== null &&
    best.routeLevel !== null &&
    workerCanServe(preferred, model) && workerAccepts(preferred, need) &&
    // C42: a `*` worker only when no exact match is free, affinity or not.
    (preferred.modelSet.has(model) || !best.modelSet.has(model)) &&
    preferred.routeLevel <= best.routeLevel + state.config.affinityLoadMargin
  ) {
    return preferred;
  }
  return best;
}

/** The best free worker for `model` other than `avoid`, exact matches first (C42), or null. */
export function pickWorkerExcept(
  state: State,
  provider: string,
  model: string,
  avoid: WorkerId,
  need: Need | null = null,
): Worker | null {
  if (state.residencyWorkers > 0) {
    return placed(
      placeRequest(state, provider, model, null, need, avoid, null, 0),
    );
  }
  const byKey = state.routes.get(provider);
  if (byKey === undefined) return null;
  const id = firstFit(state, byKey.get(model), need, avoid) ??
    firstFit(state, byKey.get(WILDCARD_MODEL), need, avoid);
  return id === null ? null : state.workers.get(id) ?? null;
}

/** Remembers who served a cache key; the map's order is least recently used first. */
export function recordAffinity(
  state: State,
  provider: string,
  model: string,
  cacheKey: string,
  workerId: WorkerId,
): void {
  const key = affinityKey(provider, model, cacheKey);
  state.affinity.delete(key);
  state.affinity.set(key, workerId);
  if (state.affinity.size > state.config.affinityKeysMax) {
    const oldest = state.affinity.keys().next();
    if (oldest.done !== true) state.affinity.delete(oldest.value);
  }
}
