// The worker's socket closed (C22): its in-flight requests are requeued without
// resetting their original deadline, or failed when they cannot be (C23, C24).
import type { Effect } from "../effect.ts";
import { dropWorker } from "../state/drop_worker.ts";
import type { State } from "../state/state.ts";
import type { Event } from "./event.ts";

type E = Extract<Event, { kind: "workerDisconnected" }>;

export function onWorkerDisconnected(state: State, e: E, out: Effect[]): void {
  if (state.pending.delete(e.workerId)) return;
  const worker = state.workers.get(e.workerId);
  if (worker === undefined) return;
  out.push({
    kind: "log",
    level: "info",
    message: "worker disconnected",
    fields: {
      worker_id: worker.id,
      worker_name: worker.name,
      in_flight: worker.inFlight.size,
      reason: e.reason,
    },
  });
  dropWorker(state, worker, `worker disconnected (${e.reason})`, out);
}
