// models_update (C26): routing follows the new acked set at once; requests in
// flight on a removed model finish normally; newly served models drain the queue.
//
// drain-v1 (issue 14): `draining: true` is the worker's own drain. It is kept like
// an operator drain (no new work, in-flight work finishes) but its models stay
// known, so requests for them queue instead of answering 404; the worker closes
// its socket itself when done.
import type { Effect } from "../effect.ts";
import { pumpQueue } from "../state/requests.ts";
import type { State } from "../state/state.ts";
import {
  sanitizeModels,
  setWorkerModels,
  syncRoute,
} from "../state/workers.ts";
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
  if (e.draining === true && !worker.draining) {
    worker.draining = true;
    worker.selfDraining = true;
    syncRoute(state, worker);
    out.push({
      kind: "log",
      level: "info",
      message: "worker draining",
      fields: {
        worker_id: worker.id,
        worker_name: worker.name,
        in_flight: worker.inFlight.size,
      },
    });
  }
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
