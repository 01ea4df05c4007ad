// GET /v1/models: acked models first, then models a lifecycle task or a
// worker's capabilities report as loading (spec 004, issue 9), then aliases
// (MODEL_ALIASES, issue 25) whose target is listed.
//
// Status (issue 30) is the fleet's best: `loaded` when a worker holds the
// model, else `loading` when one loads it (its residency, a lifecycle task,
// its capabilities), else `available` (some worker can load it). A worker
// that reports no residency (original dialect) counts as holding every model
// it acked, as before: the relay cannot tell otherwise.
// GET /v1/models/{id}: one entry of that list, or null (the shell answers 404).
import { modelStatuses } from "../state/lifecycle.ts";
import { listModels } from "../queries.ts";
import type { State } from "../state/state.ts";
import { type ModelResidency, residencyOf } from "../state/residency.ts";

type ModelObject = Record<string, unknown>;

function modelObjects(state: State): ModelObject[] {
  const statuses = new Map(modelStatuses(state).map((m) => [m.id, m]));
  const ids = [...listModels(state)];
  for (const id of statuses.keys()) if (!ids.includes(id)) ids.push(id);
  const objects = ids.map((id): ModelObject => {
    const m = statuses.get(id);
    const held = fleetHolds(state, id);
    const status = held === "loaded"
      ? "loaded"
      : held === "loading" || m?.status === "loading"
      ? "loading"
      : held ?? m?.status ?? "loaded";
    return {
      id,
      object: "model",
      created: 0,
      owned_by: "modelrelay",
      status,
      ...(status === "loading" ? { progress: m?.progress ?? 0 } : {}),
    };
  });
  const byId = new Map(objects.map((o) => [o.id as string, o]));
  for (const [alias, target] of Object.entries(state.config.modelAliases)) {
    const of = byId.get(target);
    if (of === undefined || byId.has(alias)) continue;
    const entry = { ...of, id: alias, alias_of: target };
    objects.push(entry);
    byId.set(alias, entry);
  }
  return objects;
}

/** The best residency of `id` over the workers that acked it; null = none did. */
function fleetHolds(state: State, id: string): ModelResidency | null {
  let best: ModelResidency | null = null;
  for (const w of state.workers.values()) {
    if (!w.modelSet.has(id)) continue;
    const r = residencyOf(w, id);
    if (r === "loaded") return "loaded";
    if (best === null || r === "loading") best = r;
  }
  return best;
}

export function modelList(state: State): Record<string, unknown> {
  return { object: "list", data: modelObjects(state) };
}

/** The OpenAI model object for `id` (an alias included), or null when nobody serves it. */
export function modelById(
  state: State,
  id: string,
): Record<string, unknown> | null {
  return modelObjects(state).find((o) => o.id === id) ?? null;
}
