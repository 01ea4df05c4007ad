// AUTO_LOAD (issue 30): a backend that must be asked to load a model before it
// serves it (a llama-server router started with --no-models-autoload, a spec
// 004 runner) answers a request for a model it does not hold with an error.
// With AUTO_LOAD=on the worker loads the model first: the request waits here,
// one load runs per model whatever the number of requests waiting for it, and
// when the backend has no room the least recently used idle model is unloaded
// first (idle: no request of this worker on it, and not being loaded). Then
// the waiting requests are forwarded; a load that fails answers each of them
// `backend_unavailable`, so the server sends them elsewhere.
//
// The server decided to send the request here (its placement, which counts
// this as a load); the worker only carries the load out. Backends that load on
// their own first request (Ollama, llama-swap, a router with autoload) need
// nothing here. What the backend holds is the worker's last residency read.
import type { RequestMessage } from "../protocol/mod.ts";
import { log } from "./worker_actions.ts";
import { probeResidency } from "./residency.ts";
import type { WorkerAction, WorkerState } from "./worker_state.ts";

/** Whether `model`'s request must wait for a load this worker runs. */
export function needsLoad(state: WorkerState, model: string): boolean {
  if (!state.autoLoad) return false;
  if (state.autoLoads.has(model)) return true;
  const read = state.backendHolds;
  return read !== null && read.explicitLoad === true && read.loaded !== null &&
    !read.loaded.includes(model);
}

/** Holds `r` until its model is loaded; the first request for a model starts the load. */
export function holdForLoad(
  state: WorkerState,
  r: RequestMessage,
): WorkerAction[] {
  const waiting = state.autoLoads.get(r.model);
  if (waiting !== undefined) {
    waiting.push(r);
    return [log("debug", "request waits for the model's load", {
      request_id: r.request_id,
      model: r.model,
    })];
  }
  state.autoLoads.set(r.model, [r]);
  const evict = evictionFor(state, r.model);
  // Gone as far as the next choice is concerned; the read after the load says the truth.
  if (evict !== null) noteUnloaded(state, evict);
  return [
    log("info", "loading a model for a request (AUTO_LOAD)", {
      request_id: r.request_id,
      model: r.model,
      ...(evict === null ? {} : { unloading: evict }),
    }),
    { kind: "autoLoad", model: r.model, evict },
  ];
}

/**
 * The model to unload before loading `model`: none while the backend has room
 * (or says nothing of it); else the least recently served idle one; none when
 * every held model is busy (the backend then decides, or refuses the load).
 */
export function evictionFor(state: WorkerState, model: string): string | null {
  const read = state.backendHolds;
  if (read === null || read.loaded === null) return null;
  const room = state.maxResidentModels ?? read.room ?? (read.swaps ? 1 : null);
  const held = read.loaded.filter((m) => m !== model);
  if (room === null || held.length + read.loading.length < room) return null;
  const busy = new Set(state.inFlightModels.values());
  const idle = held.filter((m) => !busy.has(m) && !state.autoLoads.has(m));
  if (idle.length === 0) return null;
  // `served` is most recent first: the idle model served longest ago (or never) goes.
  const rank = (m: string) => {
    const i = state.served.indexOf(m);
    return i === -1 ? Number.MAX_SAFE_INTEGER : i;
  };
  return idle.reduce((a, b) => rank(b) > rank(a) ? b : a);
}

/**
 * The load ended: the waiting requests still in flight (not cancelled, their
 * connection not lost) are forwarded, or, when it failed, answered
 * `backend_unavailable` through `failed`.
 */
export function onAutoLoadDone(
  state: WorkerState,
  model: string,
  error: string | null,
  failed: (requestId: string, message: string) => WorkerAction[],
): WorkerAction[] {
  const waiting = state.autoLoads.get(model) ?? [];
  state.autoLoads.delete(model);
  const live = waiting.filter((r) => state.inFlight.has(r.request_id));
  if (error !== null) {
    const out: WorkerAction[] = [
      log("warn", "AUTO_LOAD load failed", { model, error }),
    ];
    for (const r of live) {
      out.push(...failed(r.request_id, `loading ${model} failed: ${error}`));
    }
    return [...out, ...probeResidency(state)];
  }
  const read = state.backendHolds;
  if (read !== null && read.loaded !== null && !read.loaded.includes(model)) {
    read.loaded = [...read.loaded, model];
  }
  return [
    log("info", "model loaded (AUTO_LOAD)", { model, requests: live.length }),
    ...live.map((r): WorkerAction => ({ kind: "forward", request: r })),
    // The server hears of the load (and of the unload before it) at once.
    ...probeResidency(state),
  ];
}

/** An unload done for AUTO_LOAD: the model is no longer held. */
export function noteUnloaded(state: WorkerState, model: string): void {
  const read = state.backendHolds;
  if (read?.loaded != null) {
    read.loaded = read.loaded.filter((m) => m !== model);
  }
}
