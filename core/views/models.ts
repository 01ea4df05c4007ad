// GET /v1/models: acked models first (status "loaded"), then models a lifecycle
// task or a worker's capabilities report as loading (spec 004, issue 9).
import { modelStatuses } from "../state/lifecycle.ts";
import { listModels } from "../queries.ts";
import type { State } from "../state/state.ts";

export function modelList(state: State): Record<string, unknown> {
  const statuses = new Map(modelStatuses(state).map((m) => [m.id, m]));
  const ids = [...listModels(state)];
  for (const id of statuses.keys()) if (!ids.includes(id)) ids.push(id);
  return {
    object: "list",
    data: ids.map((id) => {
      const m = statuses.get(id);
      return {
        id,
        object: "model",
        created: 0,
        owned_by: "modelrelay",
        status: m?.status ?? "loaded",
        ...(m?.status === "loading" ? { progress: m.progress ?? 0 } : {}),
      };
    }),
  };
}
