// Heartbeat reply (C25): refreshes liveness and the worker's live load.
import type { Effect } from "../effect.ts";
import { pumpQueue } from "../state/requests.ts";
import type { State } from "../state/state.ts";
import { syncRoute } from "../state/workers.ts";
import type { Event } from "./event.ts";

type E = Extract<Event, { kind: "pongReceived" }>;

export function onPongReceived(state: State, e: E, out: Effect[]): void {
  const worker = state.workers.get(e.workerId);
  if (worker === undefined) return;
  worker.lastHeartbeatAtMs = state.nowMs;
  if (e.currentLoad === null) return;
  const lowered = e.currentLoad < worker.reportedLoad;
  worker.reportedLoad = e.currentLoad;
  syncRoute(state, worker);
  if (lowered) pumpQueue(state, worker.provider, out);
}
