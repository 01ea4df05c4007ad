// Deliberately broken cores for the models simulator (issue 30): each breaks
// one promise of hot-first placement, and the invariant named beside it must
// catch it on its scenario (sim/models/world_test.ts).
import { reduce, type State } from "../../core/mod.ts";
import type { ModelsMutant } from "./world.ts";

/** Routing blind to what is loaded: every worker looks empty while the core decides. */
function ignoreResidency(): typeof reduce {
  return (state: State, event) => {
    const hidden = new Map<string, Map<string, number>>();
    for (const w of state.workers.values()) {
      if (w.residency === null) continue;
      hidden.set(w.id, w.residency.loaded);
      w.residency.loaded = new Map();
    }
    const out = reduce(state, event);
    for (const [id, loaded] of hidden) {
      const r = state.workers.get(id)?.residency;
      if (r === undefined || r === null) continue;
      for (const [m, at] of r.loaded) loaded.set(m, at);
      r.loaded = loaded;
    }
    return out;
  };
}

/** No drain bound: a worker gives its room away at once, evicting a model still queued for. */
function evictUnderDemand(): typeof reduce {
  return (state, event) => {
    if (state.config.modelDrainMax !== 0) {
      state.config = { ...state.config, modelDrainMax: 0 };
    }
    return reduce(state, event);
  };
}

/** Warms models nobody asked for: a made-up request to every worker with free room. */
function prefetch(): typeof reduce {
  let n = 0;
  return (state, event) => {
    const out = reduce(state, event);
    if (event.kind !== "residencyReceived") return out;
    const w = state.workers.get(event.workerId);
    const r = w?.residency;
    if (w === undefined || r == null || r.room === null) return out;
    if (r.loaded.size + r.loading.size >= r.room) return out;
    const model = w.models.find((m) => !r.loaded.has(m) && !r.loading.has(m));
    if (model === undefined) return out;
    const id = `prefetch-${++n}`;
    r.loading.set(model, state.nowMs);
    out.effects.push(
      {
        kind: "modelLoadStarted",
        workerId: w.id,
        workerName: w.name,
        model,
        triggeredBy: id,
        reason: "demand",
        evicting: null,
      },
      {
        kind: "sendToWorker",
        workerId: w.id,
        message: {
          type: "request",
          request_id: id,
          model,
          endpoint_path: "/v1/chat/completions",
          is_streaming: true,
          body: "{}",
        },
      },
    );
    return out;
  };
}

/** A worker that dies takes its requests with it: they are never requeued nor failed. */
function forgetRequestsOfDeadWorker(): typeof reduce {
  return (state, event) => {
    if (event.kind === "workerDisconnected") {
      state.workers.get(event.workerId)?.inFlight.clear();
    }
    return reduce(state, event);
  };
}

export const MODELS_MUTANTS: readonly ModelsMutant[] = [
  {
    name: "ignore_residency",
    breaks: "hot first: a free worker holding the model goes first",
    caughtBy: "hotFirst",
    make: ignoreResidency,
    scenario: "two_boxes_overlapping",
  },
  {
    name: "evict_under_demand",
    breaks: "a model with queued demand is not evicted before the drain bound",
    caughtBy: "noEvictionUnderDemand",
    make: evictUnderDemand,
    scenario: "model_nobody_loaded",
  },
  {
    name: "prefetch",
    breaks: "a model loads only for a request that needs it",
    caughtBy: "noLoadWithoutDemand",
    make: prefetch,
    scenario: "more_models_than_room",
  },
  {
    name: "forget_requests_of_dead_worker",
    breaks: "every request ends, its worker dying mid-load included",
    caughtBy: "everyRequestEnds",
    make: forgetRequestsOfDeadWorker,
    scenario: "worker_dies_mid_load",
  },
];
