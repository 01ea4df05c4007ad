// What the models invariants (issue 30) need from the core's state just before
// a step: a load's justification is judged as the core saw the fleet then.
import {
  type Effect,
  residencyOf,
  type State,
  type Worker,
} from "../../../core/mod.ts";

export type ModelsBefore = {
  /** Each worker's drain run (requests of its resident models in a row while a model nobody held waited). */
  drainRun: Map<string, number>;
  /** Models some worker held or was loading (an original-dialect worker holds all it acked). */
  held: Set<string>;
  /** Queued models no worker held or was loading: each waits for some worker's room. */
  starved: Set<string>;
};

export function modelsBefore(state: State): ModelsBefore {
  const drainRun = new Map<string, number>();
  const held = new Set<string>();
  for (const w of state.workers.values()) {
    drainRun.set(w.id, w.residency?.drainRun ?? 0);
    for (const m of w.modelSet) {
      if (residencyOf(w, m) !== "available") held.add(m);
    }
  }
  const starved = new Set<string>();
  for (const q of state.queues.values()) {
    for (const m of q.models.keys()) if (!held.has(m)) starved.add(m);
  }
  return { drainRun, held, starved };
}

/** Whether `w` acked `model` (exactly or by `*`). */
export function acks(w: Worker, model: string): boolean {
  return w.wildcard || w.modelSet.has(model);
}

/**
 * `w`'s drain run when the step made its effect number `at`: the run before
 * the step, plus one for each request sent to `w` earlier in the step that
 * started no load there (a model it held), back to 0 after a load there. One
 * step may dispatch several requests (a worker whose backend circuit closes
 * frees all its slots at once), and the first of them may reach the bound
 * (found by the random sweep once boxes refuse requests: fleet 44). An upper
 * bound: the core does not count a request joining a load under way.
 */
export function drainRunAt(
  before: ModelsBefore,
  effects: readonly Effect[],
  at: number,
  w: Worker,
): number {
  let run = before.drainRun.get(w.id) ?? 0;
  let loadStarted = false;
  for (const f of effects.slice(0, at)) {
    if (f.kind === "modelLoadStarted" && f.workerId === w.id) {
      run = 0;
      loadStarted = true; // its request is sent next
    } else if (
      f.kind === "sendToWorker" && f.workerId === w.id &&
      f.message.type === "request"
    ) {
      if (loadStarted) loadStarted = false;
      else run++;
    }
  }
  return run;
}

/**
 * Whether `w` had served `drainMax` requests of its resident models in a row
 * while a queued model it could load was held by no worker (issue 30.3): then
 * it may give its room away, and takes no more of its resident models. `at`:
 * the step's effect being judged (the step's earlier dispatches count).
 */
export function mayYield(
  before: ModelsBefore,
  effects: readonly Effect[],
  at: number,
  w: Worker,
  drainMax: number,
): boolean {
  if (drainRunAt(before, effects, at, w) < drainMax) return false;
  for (const m of before.starved) if (acks(w, m)) return true;
  return false;
}
