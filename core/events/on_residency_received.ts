// residency (extension residency-v1, issue 30): the models the worker's backend
// holds. Routing reads them (routing.ts), so the queue may move.
import type { Effect } from "../effect.ts";
import { EXTENSION_RESIDENCY } from "../protocol/messages.ts";
import { pumpQueue } from "../state/requests.ts";
import { applyResidencyReport } from "../state/residency.ts";
import type { State } from "../state/state.ts";
import { ignoredReport } from "./drop_frame.ts";
import type { Event } from "./event.ts";

type E = Extract<Event, { kind: "residencyReceived" }>;

const NOT_NEGOTIATED =
  "ignored residency from a worker that did not negotiate it";

export function onResidencyReceived(state: State, e: E, out: Effect[]): void {
  const worker = state.workers.get(e.workerId);
  if (worker === undefined) return;
  if (ignoredReport(worker, EXTENSION_RESIDENCY, NOT_NEGOTIATED, out)) return;
  applyResidencyReport(state, worker, e, out);
  pumpQueue(state, worker.provider, out);
}
