// Read-only views of the state for /health, /v1/models and /admin/* (C17, C35).
// Queries never change state; the shell calls them directly.
import type { State } from "./state/state.ts";
import { effectiveLoad, WILDCARD_MODEL } from "./state/workers.ts";
import { type ModelResidency, residencyOf } from "./state/residency.ts";

/** Union of models acked by connected workers, first-seen order, `*` never listed (C42). */
export function listModels(state: State): string[] {
  const seen = new Set<string>();
  for (const w of state.workers.values()) {
    for (const m of w.models) if (m !== WILDCARD_MODEL) seen.add(m);
  }
  return [...seen];
}

export function queueDepth(state: State): number {
  let n = 0;
  for (const q of state.queues.values()) n += q.length;
  return n;
}

export function inFlightCount(state: State): number {
  let n = 0;
  for (const r of state.requests.values()) if (r.status.kind !== "queued") n++;
  return n;
}

export type WorkerView = {
  id: string;
  name: string;
  provider: string;
  models: string[];
  max_concurrent: number;
  load: number;
  reported_load: number;
  in_flight: number;
  cancelling: number;
  draining: boolean;
  /** Draining on its own signal (drain-v1): it closes itself when done. */
  draining_itself: boolean;
  /** Its backend circuit (issue 14): open = out of routing after backend_unavailable errors. */
  backend_circuit: "closed" | "open" | "trial";
  connected_at_ms: number;
  last_heartbeat_at_ms: number;
  protocol_version: string | null;
  /**
   * Issue 30: what its backend holds (residency-v1): each acked model's
   * state and how many it holds at once (null = no limit reported); null
   * when the worker does not report residency (original dialect).
   */
  residency: {
    room: number | null;
    models: Record<string, ModelResidency>;
  } | null;
};

export function workerViews(state: State): WorkerView[] {
  return [...state.workers.values()].map((w) => ({
    id: w.id,
    name: w.name,
    provider: w.provider,
    models: w.models,
    max_concurrent: w.maxConcurrent,
    load: effectiveLoad(w),
    reported_load: w.reportedLoad,
    in_flight: w.inFlight.size,
    cancelling: w.cancelling.size,
    draining: w.draining,
    draining_itself: w.selfDraining,
    backend_circuit: w.backend.kind,
    connected_at_ms: w.connectedAtMs,
    last_heartbeat_at_ms: w.lastHeartbeatAtMs,
    protocol_version: w.protocolVersion,
    residency: w.residency === null ? null : {
      room: w.residency.room,
      models: Object.fromEntries(
        w.models.filter((m) => m !== WILDCARD_MODEL).map((m) => [
          m,
          residencyOf(w, m),
        ]),
      ),
    },
  }));
}
