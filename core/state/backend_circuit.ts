// A worker whose backend keeps refusing connections is taken out of routing for
// a cool-down instead of eating every request sent its way (issue 14, item 3).
// Closed: routable; `backendFailuresMax` consecutive `backend_unavailable`
// errors open it. Open: not routable until `untilMs` (checked on tick). Trial
// (half-open): routable for one request at a time; any answer from the backend
// closes the circuit, another `backend_unavailable` reopens it for twice as long,
// up to `backendCoolDownMaxMs`.
import type { Effect } from "../effect.ts";
import type { State, Worker } from "./state.ts";
import { syncRoute } from "./workers.ts";

/** A scoped `backend_unavailable` from this worker: one more consecutive failure. */
export function recordBackendFailure(
  state: State,
  worker: Worker,
  out: Effect[],
): void {
  const b = worker.backend;
  const { backendFailuresMax, backendCoolDownMs, backendCoolDownMaxMs } =
    state.config;
  let coolDownMs: number;
  switch (b.kind) {
    case "open":
      return; // a late answer to a request sent before the circuit opened
    case "closed":
      if (b.failures + 1 < backendFailuresMax) {
        worker.backend = { kind: "closed", failures: b.failures + 1 };
        return;
      }
      coolDownMs = backendCoolDownMs;
      break;
    case "trial":
      coolDownMs = Math.min(b.coolDownMs * 2, backendCoolDownMaxMs);
      break;
  }
  worker.backend = {
    kind: "open",
    untilMs: state.nowMs + coolDownMs,
    coolDownMs,
  };
  syncRoute(state, worker);
  out.push({
    kind: "log",
    level: "warn",
    message: "worker backend unavailable, out of routing",
    fields: { worker_id: worker.id, cool_down_ms: coolDownMs },
  });
}

/**
 * The backend answered (a chunk or a completion): the circuit closes. True when
 * that made the worker routable again (the caller moves the queue then).
 */
export function recordBackendSuccess(state: State, worker: Worker): boolean {
  const b = worker.backend;
  if (b.kind === "closed" && b.failures === 0) return false;
  worker.backend = { kind: "closed", failures: 0 };
  syncRoute(state, worker);
  return b.kind !== "closed";
}

/** Tick: an open circuit whose cool-down ended lets one trial request through. */
export function checkBackendCoolDown(state: State, worker: Worker): void {
  const b = worker.backend;
  if (b.kind !== "open" || state.nowMs < b.untilMs) return;
  worker.backend = { kind: "trial", coolDownMs: b.coolDownMs };
  syncRoute(state, worker);
}

/**
 * Whether a cancel just made this worker take its trial: a half-open circuit
 * waits for nothing in flight, and a cancelled request no longer is (its slot
 * stays reserved, C44). The caller moves the queue then.
 */
export function trialFreedByCancel(worker: Worker): boolean {
  return worker.backend.kind === "trial" && worker.inFlight.size === 0 &&
    worker.routeLevel !== null;
}
