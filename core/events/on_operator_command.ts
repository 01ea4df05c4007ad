// Operator commands: drain one worker (C28), ask workers to refresh their models
// (C26), shut the server down gracefully (C30).
import { shuttingDown } from "../protocol/errors.ts";
import type { Effect } from "../effect.ts";
import { closeIfDrained } from "../state/drop_worker.ts";
import { fail, pumpQueue } from "../state/requests.ts";
import type { State, Worker } from "../state/state.ts";
import { syncRoute } from "../state/workers.ts";
import type { Event } from "./event.ts";

export function drainWorker(
  state: State,
  worker: Worker,
  reason: string,
  out: Effect[],
): void {
  if (worker.draining) return;
  worker.draining = true;
  syncRoute(state, worker);
  worker.drainDeadlineAtMs = state.nowMs + state.config.drainTimeoutMs;
  out.push({
    kind: "sendToWorker",
    workerId: worker.id,
    message: {
      type: "graceful_shutdown",
      reason,
      drain_timeout_secs: Math.ceil(state.config.drainTimeoutMs / 1000),
    },
  });
  out.push({
    kind: "log",
    level: "info",
    message: "graceful shutdown",
    fields: {
      worker_id: worker.id,
      worker_name: worker.name,
      in_flight: worker.inFlight.size,
      reason,
    },
  });
  closeIfDrained(state, worker, out);
  // A request waiting for another worker than the one that refused it may go
  // back there now that the other one drains (issue 14).
  pumpQueue(state, worker.provider, out);
}

export function onWorkerDrainRequested(
  state: State,
  e: Extract<Event, { kind: "workerDrainRequested" }>,
  out: Effect[],
): void {
  const worker = state.workers.get(e.workerId);
  if (worker !== undefined) drainWorker(state, worker, e.reason, out);
}

export function onModelsRefreshRequested(
  state: State,
  e: Extract<Event, { kind: "modelsRefreshRequested" }>,
  out: Effect[],
): void {
  for (const w of state.workers.values()) {
    if (e.workerId !== null && w.id !== e.workerId) continue;
    out.push({
      kind: "sendToWorker",
      workerId: w.id,
      message: { type: "models_refresh", reason: e.reason },
    });
  }
}

export function onShutdownRequested(
  state: State,
  _e: Extract<Event, { kind: "shutdownRequested" }>,
  out: Effect[],
): void {
  if (state.shuttingDown) return;
  state.shuttingDown = true;
  state.shutdownDeadlineAtMs = state.nowMs + state.config.drainTimeoutMs;
  out.push({
    kind: "log",
    level: "info",
    message: "server shutting down",
    fields: { in_flight: state.requests.size },
  });
  for (const r of [...state.requests.values()]) {
    if (r.status.kind !== "queued") continue;
    fail(
      state,
      r,
      shuttingDown(state.config),
      "failed",
      out,
    );
  }
  for (const p of [...state.pending.values()]) {
    state.pending.delete(p.id);
    out.push({
      kind: "closeWorker",
      workerId: p.id,
      code: 1001,
      reason: "server shutting down",
    });
  }
  for (const w of [...state.workers.values()]) {
    drainWorker(state, w, "server shutting down", out);
  }
}
