// Worker choice (C7, C8, C42): among workers that acked the exact model, are not
// draining and have a free slot, the lowest load wins; among equally loaded ones,
// the worker that has waited longest at that load, which is round-robin over tied
// workers. Workers that advertised `*` are considered only when no exact match is
// free. `routes` keeps routable workers by load level (load_buckets.ts), so the
// choice costs O(load levels), not a scan of the workers.
import { bucketFirst } from "./load_buckets.ts";
import type { State, Worker } from "./state.ts";
import { WILDCARD_MODEL } from "./workers.ts";

/** The worker a request for `model` should go to now, or null when none is free. */
export function pickWorker(
  state: State,
  provider: string,
  model: string,
): Worker | null {
  const byKey = state.routes.get(provider);
  if (byKey === undefined) return null;
  const id = bucketFirst(byKey.get(model)) ??
    bucketFirst(byKey.get(WILDCARD_MODEL));
  return id === null ? null : state.workers.get(id) ?? null;
}
