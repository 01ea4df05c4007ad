// noEvictionUnderDemand (issue 30.2): a load never makes a worker unload a
// model that has a request in flight there, nor one with queued demand,
// except under the drain bound (issue 30.3: the worker served its resident
// models `drainMax` times in a row while the model it loads was held by no
// worker).
import type { Effect, State } from "../../../core/mod.ts";
import { inFlightFor } from "../../../core/mod.ts";
import { drainRunAt, mayYield, type ModelsBefore } from "./models_snapshot.ts";

export function noEvictionUnderDemand(
  state: State,
  before: ModelsBefore,
  effects: Effect[],
  drainMax: number,
): string | null {
  for (const [at, f] of effects.entries()) {
    if (f.kind !== "modelLoadStarted" || f.evicting === null) continue;
    const w = state.workers.get(f.workerId);
    if (w === undefined) continue;
    const inFlight = inFlightFor(state, w, f.evicting);
    if (inFlight > 0) {
      return `loading ${f.model} on ${w.id} evicts ${f.evicting}, which has ${inFlight} request(s) in flight there`;
    }
    const queued = state.queues.get(w.provider)?.models.get(f.evicting) ?? 0;
    const bound = mayYield(before, effects, at, w, drainMax) &&
      !before.held.has(f.model);
    if (queued > 0 && !bound) {
      return `loading ${f.model} on ${w.id} evicts ${f.evicting}, which has ${queued} queued request(s) (drain run ${
        drainRunAt(before, effects, at, w)
      } < ${drainMax}, or ${f.model} was held elsewhere)`;
    }
  }
  return null;
}
