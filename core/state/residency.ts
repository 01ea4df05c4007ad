// Which models each worker's backend holds (issue 30, residency-v1), as the
// core knows it: the worker's reports, and what the core itself sent there
// since. A request sent to a worker that does not hold its model starts its
// load there (Ollama, llama-swap and a router with autoload load on a first
// request; the worker's AUTO_LOAD does it for the others), so the core marks
// the model loading at once, and loaded at the first byte served.
//
// A worker that never reported (original dialect) has `residency: null`:
// every model it acked counts as loaded, so it routes as before.
import type { Effect } from "../effect.ts";
import type { WorkerId } from "../vocabulary.ts";
import { holdersOf, refileResidency } from "./hot_routes.ts";
import type { Request, Residency, State, Worker } from "./state.ts";

export type ModelResidency = "loaded" | "loading" | "available";

export function modelTimesKey(provider: string, model: string): string {
  return `${provider}\u0000${model}`;
}

/** Where `model` stands on `worker` (an original-dialect worker holds all it acked). */
export function residencyOf(worker: Worker, model: string): ModelResidency {
  const r = worker.residency;
  if (r === null || r.loaded.has(model)) return "loaded";
  return r.loading.has(model) ? "loading" : "available";
}

/** Requests for `model` on `worker` not yet ended (cancelled ones included: the backend may still run them). */
export function inFlightFor(
  state: State,
  worker: Worker,
  model: string,
): number {
  let n = 0;
  for (const id of worker.inFlight) {
    if (state.requests.get(id)?.model === model) n++;
  }
  return n;
}

/** Queued requests for `model` (the queued demand a resident model is kept for). */
export function queuedFor(
  state: State,
  provider: string,
  model: string,
): number {
  return state.queues.get(provider)?.models.get(model) ?? 0;
}

/**
 * Queued models that no worker holds or loads: each waits for some worker's
 * room. A worker that could load one counts its drain run (`modelDrainMax`).
 */
export function starvedModels(state: State, provider: string): Set<string> {
  const out = new Set<string>();
  const q = state.queues.get(provider);
  if (q === undefined) return out;
  for (const model of q.models.keys()) {
    if (!heldByAny(state, provider, model)) out.add(model);
  }
  return out;
}

/** Whether some worker holds or loads `model` (an original-dialect one holds all it acked). */
export function heldByAny(
  state: State,
  provider: string,
  model: string,
): boolean {
  if (holdersOf(state, provider, model).size > 0) return true;
  if (!hasPlainWorkers(state)) return false;
  for (const id of state.modelIndex.get(provider)?.get(model) ?? []) {
    if (state.workers.get(id)?.residency === null) return true;
  }
  return false;
}

/**
 * Whether some registered worker never reported residency: only then are
 * the workers of a model scanned for one (a fleet mid-upgrade); a fleet that
 * reports is read through its indexes (hot_routes.ts).
 */
export function hasPlainWorkers(state: State): boolean {
  return state.workers.size > state.residencyWorkers;
}

/** Whether `worker` could load one of the `starved` models. */
function couldLoadStarved(worker: Worker, starved: Set<string>): boolean {
  for (const model of starved) {
    if (worker.wildcard || worker.modelSet.has(model)) return true;
  }
  return false;
}

/**
 * The worker has served its resident models `modelDrainMax` times in a row
 * while a model nobody holds waited, and could load it: it takes no more of
 * its resident models' requests and lets its room go (issue 30.3).
 */
export function yieldsRoom(
  state: State,
  worker: Worker,
  starved: () => Set<string>,
): boolean {
  const r = worker.residency;
  return r !== null && r.drainRun >= state.config.modelDrainMax &&
    couldLoadStarved(worker, starved());
}

/**
 * What loading one more model on `worker` unloads: null when it has room,
 * else the least recently used loaded model with nothing in flight there and
 * no queued demand (unless the worker yields its room); undefined when no
 * model may go. The backend unloads its least recently used idle model; the
 * core never sends a load that would make it unload one still wanted.
 */
export function evictionFor(
  state: State,
  worker: Worker,
  yields: boolean,
): string | null | undefined {
  const r = worker.residency;
  if (r === null) return undefined;
  if (r.room === null || r.loaded.size + r.loading.size < r.room) return null;
  for (const model of r.loaded.keys()) {
    if (inFlightFor(state, worker, model) > 0) continue;
    return yields || queuedFor(state, worker.provider, model) === 0
      ? model
      : undefined;
  }
  return undefined;
}

/** When the longest-waiting queued request for `model` entered the queue, or null when none waits. */
export function oldestQueuedAtMs(
  state: State,
  provider: string,
  model: string,
): number | null {
  const q = state.queues.get(provider);
  if (q === undefined || !q.models.has(model)) return null;
  let oldest: number | null = null;
  for (const cls of Object.values(q.classes)) {
    for (const lane of cls.tenants.values()) {
      const id = lane.byModel.get(model)?.[0];
      const at = id === undefined
        ? undefined
        : state.requests.get(id)?.queuedAtMs;
      if (at !== undefined && (oldest === null || at < oldest)) oldest = at;
    }
  }
  return oldest;
}

/** Assumed load time of a model until one is measured: any model's, else the config's. */
export function loadMsEstimate(
  state: State,
  provider: string,
  model: string,
): number {
  const t = state.modelTimes.get(modelTimesKey(provider, model));
  if (t?.loadMsAvg != null) return t.loadMsAvg;
  let sum = 0, n = 0;
  for (const other of state.modelTimes.values()) {
    if (other.loadMsAvg !== null) {
      sum += other.loadMsAvg;
      n++;
    }
  }
  return n > 0 ? sum / n : state.config.modelLoadMsAssumed;
}

/** Service time of a model's request on a worker holding it: measured, else the fleet's average. */
export function serviceMsEstimate(
  state: State,
  provider: string,
  model: string,
): number {
  const t = state.modelTimes.get(modelTimesKey(provider, model));
  return t?.serviceMsAvg ?? state.serviceMsAvg;
}

function average(prev: number | null, sample: number): number {
  return prev === null ? sample : prev * 0.8 + sample * 0.2;
}

/**
 * Models whose times are kept; beyond it the longest unmeasured-since one
 * goes (a worker may report any names: memory must not grow with them).
 */
const MODEL_TIMES_MAX = 4096;

function timesOf(state: State, provider: string, model: string) {
  const key = modelTimesKey(provider, model);
  let t = state.modelTimes.get(key);
  if (t === undefined) {
    t = { loadMsAvg: null, serviceMsAvg: null };
    if (state.modelTimes.size >= MODEL_TIMES_MAX) {
      const oldest = state.modelTimes.keys().next();
      if (oldest.done !== true) state.modelTimes.delete(oldest.value);
    }
  } else {
    state.modelTimes.delete(key);
  }
  state.modelTimes.set(key, t);
  return t;
}

/** A request sent to a worker holding its model ended: its service time counts. */
export function recordServiceMs(
  state: State,
  request: Request,
  serviceMs: number,
): void {
  // Only while some worker reports residency (nothing else reads it), and
  // only for a model a worker listed: a `*` worker takes any name.
  if (
    request.waitsForLoad || state.residencyWorkers === 0 ||
    state.modelIndex.get(request.provider)?.has(request.model) !== true
  ) return;
  const t = timesOf(state, request.provider, request.model);
  t.serviceMsAvg = average(t.serviceMsAvg, serviceMs);
}

function loadEffect(
  worker: Worker,
  model: string,
  requestId: string | null,
  evicting: string | null,
): Effect {
  return {
    kind: "modelLoadStarted",
    workerId: worker.id,
    workerName: worker.name,
    model,
    triggeredBy: requestId,
    reason: requestId === null ? "reported" : "demand",
    evicting,
  };
}

function evictedEffect(worker: Worker, model: string): Effect {
  return {
    kind: "modelEvicted",
    workerId: worker.id,
    workerName: worker.name,
    model,
  };
}

function loadedNow(
  state: State,
  worker: Worker,
  model: string,
  since: number | undefined,
  out: Effect[],
): void {
  const loadMs = since === undefined ? null : state.nowMs - since;
  if (loadMs !== null) {
    const t = timesOf(state, worker.provider, model);
    t.loadMsAvg = average(t.loadMsAvg, loadMs);
  }
  out.push({
    kind: "modelLoadFinished",
    workerId: worker.id,
    workerName: worker.name,
    model,
    loadMs,
  });
}

/**
 * `request` goes to `worker` (requests.ts dispatch): a model it holds is used
 * (least recently used order), one it does not hold starts loading there,
 * unloading `evictionFor`'s model when the worker has no room.
 */
export function noteDispatched(
  state: State,
  worker: Worker,
  request: Request,
  out: Effect[],
): void {
  const r = worker.residency;
  const model = request.model;
  if (r === null) {
    request.waitsForLoad = false;
    return;
  }
  if (r.loaded.has(model)) {
    request.waitsForLoad = false;
    r.loaded.delete(model);
    r.loaded.set(model, state.nowMs);
    r.drainRun = couldLoadStarved(worker, starvedModels(state, worker.provider))
      ? r.drainRun + 1
      : 0;
    return;
  }
  request.waitsForLoad = true;
  if (r.loading.has(model)) return;
  // The drain bound gives room only to a model no worker holds.
  const yields = !heldByAny(state, worker.provider, model) &&
    yieldsRoom(
      state,
      worker,
      () => starvedModels(state, worker.provider).add(model),
    );
  const evicting = evictionFor(state, worker, yields) ?? null;
  if (evicting !== null) {
    r.loaded.delete(evicting);
    out.push(evictedEffect(worker, evicting));
  }
  r.loading.set(model, state.nowMs);
  r.drainRun = 0;
  out.push(loadEffect(worker, model, request.id, evicting));
}

/**
 * The backend answered a request for `model` (its first byte, or a whole
 * answer): it holds the model. Returns whether that is news (the queue may move).
 */
export function noteServed(
  state: State,
  worker: Worker,
  model: string,
  out: Effect[],
): boolean {
  const r = worker.residency;
  if (r === null || r.loaded.has(model)) return false;
  const since = r.loading.get(model);
  r.loading.delete(model);
  r.loaded.set(model, state.nowMs);
  loadedNow(state, worker, model, since, out);
  trimToRoom(state, worker, r, out);
  refileResidency(state, worker);
  return true;
}

/** The core's view never holds more than the room: least recently used idle models go first. */
function trimToRoom(
  state: State,
  worker: Worker,
  r: Residency,
  out: Effect[],
): void {
  if (r.room === null) return;
  while (r.loaded.size + r.loading.size > r.room) {
    let victim: string | undefined;
    for (const model of r.loaded.keys()) {
      if (inFlightFor(state, worker, model) === 0) {
        victim = model;
        break;
      }
    }
    if (victim === undefined) return;
    r.loaded.delete(victim);
    out.push(evictedEffect(worker, victim));
  }
}

/**
 * A `residency` report: the whole picture replaces the core's, except that a
 * model with a request in flight there stays loaded or loading (the report
 * may predate the request), and times of known loads carry over.
 */
export function applyResidencyReport(
  state: State,
  worker: Worker,
  report: { loaded: string[]; loading: string[]; room: number | null },
  out: Effect[],
): void {
  let r = worker.residency;
  if (r === null) {
    r = {
      loaded: new Map(),
      loading: new Map(),
      room: null,
      drainRun: 0,
      held: new Set(),
      filed: null,
    };
    worker.residency = r;
    state.residencyWorkers++;
  }
  r.room = report.room;
  // As many names as a worker may list (C4): a report cannot grow memory past it.
  const max = state.config.modelsPerWorkerMax;
  const reportedLoaded = report.loaded.slice(0, max);
  const reportedLoading = report.loading.slice(0, max);
  const reported = new Set(reportedLoaded);
  const loaded = new Map<string, number>();
  // Least recently used order: known models keep their place, new ones follow.
  for (const [model, at] of r.loaded) {
    if (reported.has(model)) loaded.set(model, at);
  }
  for (const model of reportedLoaded) {
    if (!loaded.has(model)) loaded.set(model, state.nowMs);
  }
  const loading = new Map<string, number>();
  for (const model of reportedLoading) {
    if (!loaded.has(model)) {
      loading.set(model, r.loading.get(model) ?? state.nowMs);
    }
  }
  let pending = false;
  for (const id of worker.inFlight) {
    const model = state.requests.get(id)?.model;
    if (model === undefined || loaded.has(model) || loading.has(model)) {
      continue;
    }
    pending = true;
    const at = r.loaded.get(model);
    if (at !== undefined) loaded.set(model, at);
    else loading.set(model, r.loading.get(model) ?? state.nowMs);
  }
  for (const model of r.loaded.keys()) {
    if (!loaded.has(model)) out.push(evictedEffect(worker, model));
  }
  for (const model of loaded.keys()) {
    if (!r.loaded.has(model)) {
      loadedNow(state, worker, model, r.loading.get(model), out);
    }
  }
  for (const model of loading.keys()) {
    if (!r.loading.has(model)) out.push(loadEffect(worker, model, null, null));
  }
  r.loaded = loaded;
  r.loading = loading;
  if (pending) trimToRoom(state, worker, r, out);
  refileResidency(state, worker);
}

/** Residency of every worker, for views: worker id -> model -> state. */
export function fleetResidency(
  state: State,
  provider: string,
): Map<WorkerId, Map<string, ModelResidency>> {
  const out = new Map<WorkerId, Map<string, ModelResidency>>();
  for (const w of state.workers.values()) {
    if (w.provider !== provider) continue;
    const m = new Map<string, ModelResidency>();
    for (const model of w.models) m.set(model, residencyOf(w, model));
    out.set(w.id, m);
  }
  return out;
}
