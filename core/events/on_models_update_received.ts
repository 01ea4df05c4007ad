// models_update (C26): routing follows the new acked set at once; requests in
// flight on a removed model finish normally; newly served models drain the queue.
import type { Effect } from "../effect.ts";
import { pumpQueue } from "../state/requests.ts";
import type { State } from "../state/state.ts";
import { sanitizeModels, setWorkerModels } from "../state/workers.ts";
import type { Event } from "./event.ts";

type E = Extract<Event, { kind: "modelsUpdateReceived" }>;

export function onModelsUpdateReceived(
  state: State,
  e: E,
  out: Effect[],
): void {
  const worker = state.workers.get(e.workerId);
  if (worker === undefined) return;
  const models = sanitizeModels(e.models, state.config);
  if (e.currentLoad !== null) worker.reportedLoad = e.currentLoad;
  setWorkerModels(state, worker, models.value);
  out.push({
    kind: "log",
    level: "info",
    message: "worker models updated",
    fields: {
      worker_id: worker.id,
      models: worker.models.join(","),
      warnings: models.warnings.join("; "),
    },
  });
  pumpQueue(state, worker.provider, out);
}
