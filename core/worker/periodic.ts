// The worker's periodic looks at its backend (issue 27): the capabilities probe
// and, for discovered models, the models refresh. Each is a timer the core arms
// at start and again each time it fires, so the shell only runs timers (before,
// the worker's shell repeated them on its own interval timers).
import { EXTENSION_CAPABILITIES } from "../protocol/mod.ts";
import { residencyTimers } from "./residency.ts";
import type { WorkerAction, WorkerState } from "./worker_state.ts";

/** How often the worker looks at the backend's capabilities (sent only on change). */
export const CAPABILITIES_INTERVAL_MS = 5_000;

/**
 * The periodic timers, armed once at start (`startActions`): they run whether
 * or not the link is up; what a firing does depends on the link at that moment.
 */
export function periodicTimers(state: WorkerState): WorkerAction[] {
  return [
    capabilitiesTimer(),
    ...modelsRefreshTimer(state),
    ...residencyTimers(state),
  ];
}

/** The capabilities timer fired: probe if the server takes capabilities, and re-arm. */
export function onCapabilitiesDue(state: WorkerState): WorkerAction[] {
  const probe: WorkerAction[] = state.registered &&
      state.extensions.includes(EXTENSION_CAPABILITIES)
    ? [{ kind: "probeCapabilities" }]
    : [];
  return [...probe, capabilitiesTimer()];
}

/**
 * The models refresh timer fired: list the backend's models while registered
 * and not draining (a draining worker advertises what it has), and re-arm.
 */
export function onModelsRefreshDue(state: WorkerState): WorkerAction[] {
  const list: WorkerAction[] = state.modelsDiscovered && state.registered &&
      state.drain.kind === "none"
    ? [{ kind: "listModels", reply: false }]
    : [];
  return [...list, ...modelsRefreshTimer(state)];
}

function capabilitiesTimer(): WorkerAction {
  return {
    kind: "armTimer",
    timer: "capabilities",
    ms: CAPABILITIES_INTERVAL_MS,
  };
}

/** Only discovered models are refreshed, and only with MODELS_REFRESH_SECS > 0. */
function modelsRefreshTimer(state: WorkerState): WorkerAction[] {
  return state.modelsDiscovered && state.modelsRefreshMs > 0
    ? [{ kind: "armTimer", timer: "modelsRefresh", ms: state.modelsRefreshMs }]
    : [];
}
