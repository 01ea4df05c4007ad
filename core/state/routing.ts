// Worker choice (C7, C8, C42): among workers that acked the exact model, are not
// draining and have a free slot, the lowest load wins; ties go to the worker that
// was dispatched to least recently, which is round-robin over tied workers.
// Workers that advertised `*` are considered only when no exact match is free.
// Cost: linear in the workers that serve the model, not in all workers.
import type { WorkerId } from "../events/event.ts";
import type { State, Worker } from "./state.ts";
import { effectiveLoad } from "./workers.ts";

function bestOf(state: State, ids: Set<WorkerId> | undefined): Worker | null {
  if (ids === undefined) return null;
  let best: Worker | null = null;
  let bestLoad = 0;
  for (const id of ids) {
    const w = state.workers.get(id);
    if (w === undefined || w.draining) continue;
    const load = effectiveLoad(w);
    if (load >= w.maxConcurrent) continue;
    if (
      best === null || load < bestLoad ||
      (load === bestLoad && w.lastDispatchSeq < best.lastDispatchSeq)
    ) {
      best = w;
      bestLoad = load;
    }
  }
  return best;
}

/** The worker a request for `model` should go to now, or null when none is free. */
export function pickWorker(
  state: State,
  provider: string,
  model: string,
): Worker | null {
  const exact = bestOf(state, state.modelIndex.get(provider)?.get(model));
  if (exact !== null) return exact;
  return bestOf(state, state.wildcardIndex.get(provider));
}
