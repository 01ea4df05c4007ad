// GET /v1/models: acked models first (status "loaded"), then models a lifecycle
// task or a worker's capabilities report as loading (spec 004, issue 9), then
// aliases (MODEL_ALIASES, issue 25) whose target is listed.
// GET /v1/models/{id}: one entry of that list, or null (the shell answers 404).
import { modelStatuses } from "../state/lifecycle.ts";
import { listModels } from "../queries.ts";
import type { State } from "../state/state.ts";

type ModelObject = Record<string, unknown>;

function modelObjects(state: State): ModelObject[] {
  const statuses = new Map(modelStatuses(state).map((m) => [m.id, m]));
  const ids = [...listModels(state)];
  for (const id of statuses.keys()) if (!ids.includes(id)) ids.push(id);
  const objects = ids.map((id): ModelObject => {
    const m = statuses.get(id);
    return {
      id,
      object: "model",
      created: 0,
      owned_by: "modelrelay",
      status: m?.status ?? "loaded",
      ...(m?.status === "loading" ? { progress: m.progress ?? 0 } : {}),
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
