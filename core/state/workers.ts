// Worker registry rules: sanitization of what a worker advertises (C4), the
// model index used for routing (C6, C42), and load accounting (C8, C44).
import type { Config } from "../config.ts";
import type { WorkerId } from "../vocabulary.ts";
import { type Need, workerAccepts } from "./accepts.ts";
import { refileResidency } from "./hot_routes.ts";
import {
  bucketAdd,
  bucketForget,
  bucketPark,
  bucketsEmpty,
  emptyBuckets,
} from "./load_buckets.ts";
import type { State, Worker } from "./state.ts";

export const WILDCARD_MODEL = "*";

export type Sanitized<T> = { value: T; warnings: string[] };

/** Trim, drop empty, drop exact duplicates keeping first-seen order, cap the list (C4). */
export function sanitizeModels(
  models: readonly string[],
  config: Config,
): Sanitized<string[]> {
  const warnings: string[] = [];
  const seen = new Set<string>();
  const value: string[] = [];
  let empty = 0;
  let duplicates = 0;
  for (const raw of models) {
    const name = raw.trim();
    if (name.length === 0) {
      empty++;
      continue;
    }
    if (name.length > config.modelNameCharsMax) {
      warnings.push(
        `model name of ${name.length} characters dropped (limit ${config.modelNameCharsMax})`,
      );
      continue;
    }
    if (name !== raw) {
      warnings.push(`model "${name}" had surrounding whitespace, trimmed`);
    }
    if (seen.has(name)) {
      duplicates++;
      continue;
    }
    seen.add(name);
    value.push(name);
  }
  if (empty > 0) warnings.push(`${empty} empty model name(s) dropped`);
  if (duplicates > 0) {
    warnings.push(`${duplicates} duplicate model name(s) dropped`);
  }
  if (value.length > config.modelsPerWorkerMax) {
    warnings.push(
      `${value.length} models advertised, only the first ${config.modelsPerWorkerMax} accepted`,
    );
    value.length = config.modelsPerWorkerMax;
  }
  return { value, warnings };
}

/** Bounded, non-empty worker name (C4). */
export function sanitizeWorkerName(
  name: string,
  config: Config,
): Sanitized<string> {
  const trimmed = name.trim();
  if (trimmed.length === 0) {
    return {
      value: "worker",
      warnings: ['empty worker_name replaced by "worker"'],
    };
  }
  if (trimmed.length > config.workerNameCharsMax) {
    return {
      value: trimmed.slice(0, config.workerNameCharsMax),
      warnings: [
        `worker_name truncated to ${config.workerNameCharsMax} characters`,
      ],
    };
  }
  return { value: trimmed, warnings: [] };
}

/** max_concurrent clamped to 1..maxConcurrentMax (C4). */
export function sanitizeMaxConcurrent(
  n: number,
  config: Config,
): Sanitized<number> {
  if (n < 1) return { value: 1, warnings: [`max_concurrent ${n} raised to 1`] };
  if (n > config.maxConcurrentMax) {
    return {
      value: config.maxConcurrentMax,
      warnings: [`max_concurrent ${n} capped at ${config.maxConcurrentMax}`],
    };
  }
  return { value: n, warnings: [] };
}

/**
 * The load routing sees: the larger of what we reserved (in flight plus cancelled
 * slots awaiting acknowledgment, C44) and what the worker last reported, so a
 * backend busy with other clients is not overloaded (C8).
 */
export function effectiveLoad(worker: Worker): number {
  const reserved = worker.inFlight.size + worker.cancelling.size;
  return reserved > worker.reportedLoad ? reserved : worker.reportedLoad;
}

/** Whether the backend circuit lets a request through (backend_circuit.ts). */
export function backendRoutable(worker: Worker): boolean {
  switch (worker.backend.kind) {
    case "closed":
      return true;
    case "open":
      return false;
    case "trial":
      // One trial at a time: its answer decides.
      return worker.inFlight.size === 0;
  }
}

export function hasCapacity(worker: Worker): boolean {
  return !worker.draining && backendRoutable(worker) &&
    effectiveLoad(worker) < worker.maxConcurrent;
}

function routeKeys(worker: Worker): Iterable<string> {
  return worker.wildcard
    ? [...worker.modelSet, WILDCARD_MODEL]
    : worker.modelSet;
}

/**
 * Files the worker at `to` under each of its route keys, or takes it out (null):
 * parked while it may come back (full, draining), forgotten when `leaving` (gone,
 * or about to be re-filed under new models) so the buckets hold no one else.
 */
function moveRoute(
  state: State,
  worker: Worker,
  to: number | null,
  leaving: boolean,
): void {
  if (worker.routeLevel === to && !leaving) return;
  const byKey = state.routes.get(worker.provider);
  if (byKey === undefined) return;
  for (const key of routeKeys(worker)) {
    let b = byKey.get(key);
    if (b === undefined) {
      if (to === null) continue;
      b = emptyBuckets();
      byKey.set(key, b);
    }
    if (to !== null) bucketAdd(b, to, worker.id);
    else if (leaving) bucketForget(b, worker.id);
    else bucketPark(b, worker.id);
    if (bucketsEmpty(b)) byKey.delete(key);
  }
  worker.routeLevel = to;
}

/**
 * Files the worker under its current load for routing, or takes it out when it
 * cannot take work (draining, full, gone). Call after anything that changes its
 * load, models or drain state.
 */
export function syncRoute(state: State, worker: Worker): void {
  const load = effectiveLoad(worker);
  const gone = state.workers.get(worker.id) !== worker;
  const routable = !gone && !worker.draining &&
    load < worker.maxConcurrent && backendRoutable(worker);
  moveRoute(state, worker, routable ? load : null, gone);
  refileResidency(state, worker);
}

/** Adds the worker's acked models to the routing index. */
export function indexWorker(state: State, worker: Worker): void {
  const byModel = state.modelIndex.get(worker.provider);
  if (byModel === undefined) return;
  const gone = state.modelsGone.get(worker.provider);
  for (const model of worker.modelSet) {
    let set = byModel.get(model);
    if (set === undefined) {
      set = new Set();
      byModel.set(model, set);
      gone?.delete(model);
    }
    set.add(worker.id);
  }
  if (worker.wildcard) state.wildcardIndex.get(worker.provider)?.add(worker.id);
  syncRoute(state, worker);
}

export function unindexWorker(state: State, worker: Worker): void {
  moveRoute(state, worker, null, true);
  refileResidency(state, worker);
  const byModel = state.modelIndex.get(worker.provider);
  if (byModel !== undefined) {
    for (const model of worker.modelSet) {
      const set = byModel.get(model);
      if (set === undefined) continue;
      set.delete(worker.id);
      if (set.size === 0) {
        byModel.delete(model);
        noteModelGone(state, worker.provider, model);
      }
    }
  }
  state.wildcardIndex.get(worker.provider)?.delete(worker.id);
}

/** Entries of `modelsGone` beyond which expired ones are swept (memory bound). */
const MODELS_GONE_SWEEP_AT = 1024;

/**
 * Remembers when a model lost its last worker. Expired entries are swept only
 * once the map is large: a worker re-listing its models (every
 * MODELS_REFRESH_SECS) unindexes and reindexes each one, and a sweep per model
 * would be quadratic; `modelServedRecently` checks the time anyway.
 */
function noteModelGone(state: State, provider: string, model: string): void {
  const gone = state.modelsGone.get(provider);
  if (gone === undefined) return;
  if (gone.size >= MODELS_GONE_SWEEP_AT) {
    const expired = state.nowMs - state.config.modelGraceMs;
    for (const [m, atMs] of gone) if (atMs <= expired) gone.delete(m);
  }
  gone.set(model, state.nowMs);
}

/**
 * Whether a worker served `model` within the grace period (issue 24): a
 * request for it waits in the queue for that worker's return, as during a
 * drain, instead of a 404 SDKs do not retry.
 */
export function modelServedRecently(
  state: State,
  provider: string,
  model: string,
): boolean {
  const atMs = state.modelsGone.get(provider)?.get(model);
  return atMs !== undefined &&
    state.nowMs - atMs < state.config.modelGraceMs;
}

/** Replaces a worker's acked models, keeping the index in step (C26). */
export function setWorkerModels(
  state: State,
  worker: Worker,
  models: string[],
): void {
  unindexWorker(state, worker);
  worker.wildcard = models.includes(WILDCARD_MODEL);
  worker.models = models;
  worker.modelSet = new Set(models.filter((m) => m !== WILDCARD_MODEL));
  indexWorker(state, worker);
}

/**
 * Frees a request's slot on its worker (completion, cancel acknowledged, loss).
 */
export function releaseSlot(
  state: State,
  worker: Worker,
  requestId: string,
): void {
  const held = worker.inFlight.delete(requestId) ||
    worker.cancelling.delete(requestId);
  // One finished request lowers a higher reported load by one: the backend may be
  // busy with other clients too, so the rest of the report stands until the next pong.
  if (held && worker.reportedLoad > 0) worker.reportedLoad--;
  syncRoute(state, worker);
}

export function workerCanServe(worker: Worker, model: string): boolean {
  return worker.wildcard || worker.modelSet.has(model);
}

/** Whether any connected worker of the provider (draining included) acked the model (C11). */
export function modelKnown(
  state: State,
  provider: string,
  model: string,
): boolean {
  const set = state.modelIndex.get(provider)?.get(model);
  if (set !== undefined && set.size > 0) return true;
  return (state.wildcardIndex.get(provider)?.size ?? 0) > 0;
}

/**
 * Whether a worker other than `avoid` could serve the model soon (acked it, not
 * draining, backend circuit not open): then a request that failed on `avoid`
 * waits for it instead of going back (issue 14).
 */
export function otherWorkerServes(
  state: State,
  provider: string,
  model: string,
  avoid: WorkerId,
  need: Need | null = null,
): boolean {
  const usable = (id: WorkerId): boolean => {
    if (id === avoid) return false;
    const w = state.workers.get(id);
    return w !== undefined && !w.draining && w.backend.kind !== "open" &&
      workerAccepts(w, need);
  };
  for (const id of state.modelIndex.get(provider)?.get(model) ?? []) {
    if (usable(id)) return true;
  }
  for (const id of state.wildcardIndex.get(provider) ?? []) {
    if (usable(id)) return true;
  }
  return false;
}

/** Whether any worker of the provider is registered; stops at the first one found. */
export function hasWorkers(state: State, provider: string): boolean {
  for (const w of state.workers.values()) {
    if (w.provider === provider) return true;
  }
  return false;
}

export function getWorker(state: State, id: WorkerId): Worker | undefined {
  return state.workers.get(id);
}
