// The reducer: (state, event) -> { state, effects }.
//
// "Pure" here means deterministic and free of I/O, clock and randomness, not
// "copies everything": the state object is owned by its holder (shell or
// simulator) and updated in place, and the same object is returned. Copying
// Maps per chunk is what makes relays slow (conventions P1). Callers that need
// before/after snapshots clone explicitly.
import { assertNever } from "./assert_never.ts";
import type { Effect } from "./effect.ts";
import type { Event } from "./events/event.ts";
import { onCapabilitiesReceived } from "./events/on_capabilities_received.ts";
import { onChunkReceived } from "./events/on_chunk_received.ts";
import { onClientGone } from "./events/on_client_disconnected.ts";
import { onCompleteReceived } from "./events/on_complete_received.ts";
import { onLifecycleProgressReceived } from "./events/on_lifecycle_progress_received.ts";
import { onLifecycleRequested } from "./events/on_lifecycle_requested.ts";
import { onModelsUpdateReceived } from "./events/on_models_update_received.ts";
import {
  onModelsRefreshRequested,
  onShutdownRequested,
  onWorkerDrainRequested,
} from "./events/on_operator_command.ts";
import { onPongReceived } from "./events/on_pong_received.ts";
import { onRegisterReceived } from "./events/on_register_received.ts";
import { onRequestReceived } from "./events/on_request_received.ts";
import { onResidencyReceived } from "./events/on_residency_received.ts";
import { onTick } from "./events/on_tick.ts";
import { onWorkerConnectAttempted } from "./events/on_worker_connect_attempted.ts";
import { onWorkerDisconnected } from "./events/on_worker_disconnected.ts";
import { onWorkerErrorReceived } from "./events/on_worker_error_received.ts";
import { onHeadReceived } from "./events/on_head_received.ts";
import {
  onWorkerFrameInvalid,
  protocolViolation,
} from "./events/on_worker_frame_invalid.ts";
import { bodyProgress, bodySent } from "./state/body_budget.ts";
import type { State } from "./state/state.ts";

export type Reduced = { state: State; effects: Effect[] };

/** A frame from a worker that has not registered yet is a protocol violation: true when this one is. */
function beforeRegister(
  state: State,
  workerId: string,
  out: Effect[],
): boolean {
  if (!state.pending.has(workerId)) return false;
  protocolViolation(
    state,
    workerId,
    "expected register as the first message",
    out,
  );
  return true;
}

export function reduce(state: State, event: Event): Reduced {
  // Time only moves forward; a shell clock that stepped back is clamped, not trusted.
  if (event.atMs > state.nowMs) state.nowMs = event.atMs;
  state.version++;
  const out: Effect[] = [];
  switch (event.kind) {
    case "chunkReceived":
      // The hot path, kept first and flat (C15).
      if (!beforeRegister(state, event.workerId, out)) {
        onChunkReceived(state, event, out);
      }
      break;
    case "completeReceived":
    case "headReceived":
    case "pongReceived":
    case "modelsUpdateReceived":
    case "workerErrorReceived":
    case "capabilitiesReceived":
    case "residencyReceived":
    case "lifecycleProgressReceived":
      if (beforeRegister(state, event.workerId, out)) break;
      switch (event.kind) {
        case "completeReceived":
          onCompleteReceived(state, event, out);
          break;
        case "headReceived":
          onHeadReceived(state, event, out);
          break;
        case "pongReceived":
          onPongReceived(state, event, out);
          break;
        case "modelsUpdateReceived":
          onModelsUpdateReceived(state, event, out);
          break;
        case "workerErrorReceived":
          onWorkerErrorReceived(state, event, out);
          break;
        case "capabilitiesReceived":
          onCapabilitiesReceived(state, event, out);
          break;
        case "residencyReceived":
          onResidencyReceived(state, event, out);
          break;
        case "lifecycleProgressReceived":
          onLifecycleProgressReceived(state, event, out);
          break;
      }
      break;
    case "workerConnectAttempted":
      onWorkerConnectAttempted(state, event, out);
      break;
    case "registerReceived":
      onRegisterReceived(state, event, out);
      break;
    case "workerFrameInvalid":
      onWorkerFrameInvalid(state, event, out);
      break;
    case "workerDisconnected":
      onWorkerDisconnected(state, event, out);
      break;
    case "requestReceived":
      onRequestReceived(state, event, out);
      break;
    case "clientDisconnected":
    case "clientStalled":
      onClientGone(state, event, out);
      break;
    case "responseSent":
      bodySent(state, event.requestId);
      break;
    case "responseProgress":
      bodyProgress(state, event.requestId, event.written);
      break;
    case "tick":
      onTick(state, event, out);
      break;
    case "workerDrainRequested":
      onWorkerDrainRequested(state, event, out);
      break;
    case "modelsRefreshRequested":
      onModelsRefreshRequested(state, event, out);
      break;
    case "shutdownRequested":
      onShutdownRequested(state, event, out);
      break;
    case "lifecycleRequested":
      onLifecycleRequested(state, event, out);
      break;
    default:
      assertNever(event);
  }
  if (
    state.shuttingDown && !state.shutdownCompleted &&
    state.requests.size === 0 &&
    state.workers.size === 0 && state.pending.size === 0
  ) {
    state.shutdownCompleted = true;
    out.push({ kind: "shutdownComplete" });
  }
  return { state, effects: out };
}
