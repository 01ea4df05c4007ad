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
import type { WorkerId } from "../events/event.ts";
import { bucketFirst, bucketFirstExcept } from "./load_buckets.ts";
import type { State, Worker } from "./state.ts";
import { WILDCARD_MODEL, workerCanServe } from "./workers.ts";

export function affinityKey(
  provider: string,
  model: string,
  cacheKey: string,
): string {
  return `${provider}\u0000${model}\u0000${cacheKey}`;
}

/** The worker a request for `model` should go to now, or null when none is free. */
export function pickWorker(
  state: State,
  provider: string,
  model: string,
  cacheKey: string | null = null,
): Worker | null {
  const byKey = state.routes.get(provider);
  if (byKey === undefined) return null;
  const id = bucketFirst(byKey.get(model)) ??
    bucketFirst(byKey.get(WILDCARD_MODEL));
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
    workerCanServe(preferred, model) &&
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
): Worker | null {
  const byKey = state.routes.get(provider);
  if (byKey === undefined) return null;
  const id = bucketFirstExcept(byKey.get(model), avoid) ??
    bucketFirstExcept(byKey.get(WILDCARD_MODEL), avoid);
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
