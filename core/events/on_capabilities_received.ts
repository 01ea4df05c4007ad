// capabilities (extension capabilities-v1): the worker's spec 004 capabilities,
// kept as last reported for /v1/capabilities and for choosing where a model loads.
import type { Effect } from "../effect.ts";
import { EXTENSION_CAPABILITIES } from "../protocol/messages.ts";
import type { State } from "../state/state.ts";
import { ignoredReport } from "./drop_frame.ts";
import type { Event } from "./event.ts";

type E = Extract<Event, { kind: "capabilitiesReceived" }>;

const NOT_NEGOTIATED =
  "ignored capabilities from a worker that did not negotiate them";

export function onCapabilitiesReceived(
  state: State,
  e: E,
  out: Effect[],
): void {
  const worker = state.workers.get(e.workerId);
  if (worker === undefined) return;
  if (ignoredReport(worker, EXTENSION_CAPABILITIES, NOT_NEGOTIATED, out)) {
    return;
  }
  worker.capabilities = e.capabilities;
  worker.capabilitiesAtMs = e.atMs;
}
