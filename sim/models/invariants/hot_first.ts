// hotFirst (issue 30.2): no load starts while a worker with the model loaded
// had a free slot. A load is the core sending a request to a worker that does
// not hold its model (`modelLoadStarted`, reason demand); after that step, no
// routable worker with a free slot may hold the model, unless it was giving
// its room away under the drain bound (issue 30.3).
import type { Effect, State } from "../../../core/mod.ts";
import { residencyOf } from "../../../core/mod.ts";
import { acks, mayYield, type ModelsBefore } from "./models_snapshot.ts";

export function hotFirst(
  state: State,
  before: ModelsBefore,
  effects: Effect[],
  drainMax: number,
): string | null {
  for (const [at, f] of effects.entries()) {
    if (f.kind !== "modelLoadStarted" || f.reason !== "demand") continue;
    for (const w of state.workers.values()) {
      if (
        w.routeLevel !== null && acks(w, f.model) &&
        residencyOf(w, f.model) === "loaded" &&
        !mayYield(before, effects, at, w, drainMax)
      ) {
        return `${f.model} started loading on ${f.workerId} (for ${f.triggeredBy}) while ${w.id} held it with a free slot (load ${w.routeLevel} of ${w.maxConcurrent})`;
      }
    }
  }
  return null;
}
