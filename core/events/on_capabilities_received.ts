// capabilities (extension capabilities-v1): the worker's spec 004 capabilities,
// kept as last reported for /v1/capabilities and for choosing where a model loads.
import type { Effect } from "../effect.ts";
import { EXTENSION_CAPABILITIES } from "../protocol/messages.ts";
import type { State } from "../state/state.ts";
import type { Event } from "./event.ts";

type E = Extract<Event, { kind: "capabilitiesReceived" }>;

export function onCapabilitiesReceived(
  state: State,
  e: E,
  out: Effect[],
): void {
  const worker = state.workers.get(e.workerId);
  if (worker === undefined) return;
  if (!worker.extensions.includes(EXTENSION_CAPABILITIES)) {
    out.push({
      kind: "log",
      level: "warn",
      message: "ignored capabilities from a worker that did not negotiate them",
      fields: { worker_id: worker.id, extension: EXTENSION_CAPABILITIES },
    });
    return;
  }
  worker.capabilities = e.capabilities;
  worker.capabilitiesAtMs = e.atMs;
}
