// The worker's residency reports (issue 30, residency-v1): which models its
// backend holds, sent to the server after register_ack, after every answer,
// load and unload, and on the `residency` timer. The shell reads the backend
// (Ollama /api/ps, llama-server router /models, llama-swap /running, spec 004
// capabilities); where the backend says nothing, the worker reports what it
// last served, but only when MAX_RESIDENT_MODELS says it swaps. One read runs
// at a time: asks during a read are folded into one more read after it.
import { EXTENSION_RESIDENCY } from "../protocol/mod.ts";
import { send } from "./worker_actions.ts";
import type {
  BackendResidency,
  WorkerAction,
  WorkerState,
} from "./worker_state.ts";

/** How often the worker reads its backend's residency (sent only on change). */
export const RESIDENCY_INTERVAL_MS = 5_000;

/** Models remembered as last served (the report where the backend says nothing). */
const SERVED_MAX = 64;

export function speaksResidency(state: WorkerState): boolean {
  return state.registered && state.extensions.includes(EXTENSION_RESIDENCY);
}

/** Armed at start only by a worker that speaks residency-v1 (the simulator's original-style ones arm nothing). */
export function residencyTimers(state: WorkerState): WorkerAction[] {
  return state.speaks?.includes(EXTENSION_RESIDENCY) === true
    ? [residencyTimer()]
    : [];
}

function residencyTimer(): WorkerAction {
  return { kind: "armTimer", timer: "residency", ms: RESIDENCY_INTERVAL_MS };
}

/**
 * Reads asked while one runs are folded into one more, at least this long
 * after: a busy worker asks after every answer, and would otherwise read its
 * backend back to back (hundreds of `/api/ps` a second).
 */
export const RESIDENCY_GAP_MS = 1_000;

/** A read of the backend's residency, or one more after the read under way. */
export function probeResidency(state: WorkerState): WorkerAction[] {
  if (!speaksResidency(state)) return [];
  if (state.residencyProbe === "running") state.residencyProbe = "again";
  if (state.residencyProbe !== "idle") return [];
  state.residencyProbe = "running";
  return [{ kind: "probeResidency" }];
}

export function onResidencyDue(state: WorkerState): WorkerAction[] {
  if (state.residencyProbe === "due") state.residencyProbe = "idle";
  return [...probeResidency(state), residencyTimer()];
}

/** An answer for `model` went to the proxy: the backend held it. */
export function noteServed(state: WorkerState, model: string): void {
  const i = state.served.indexOf(model);
  if (i === 0) return;
  if (i > 0) state.served.splice(i, 1);
  state.served.unshift(model);
  if (state.served.length > SERVED_MAX) state.served.length = SERVED_MAX;
}

/**
 * The frame the worker would send for this read, or null when it has nothing
 * to say. Room: MAX_RESIDENT_MODELS, else what the backend reports, else 1
 * for a backend that swaps, else no limit; never fewer than it holds now.
 */
export function residencyFrame(
  state: WorkerState,
  read: BackendResidency | null,
): { loaded: string[]; loading: string[]; room: number | null } | null {
  const configured = state.maxResidentModels;
  const reported = read?.loaded ?? null;
  if (reported === null && configured === null) return null;
  const loading = read?.loading ?? [];
  let room = configured ?? read?.room ?? (read?.swaps === true ? 1 : null);
  const loaded = reported ??
    state.served.filter((m) => !loading.includes(m)).slice(0, room ?? 1);
  if (room !== null && configured === null) {
    room = Math.max(room, loaded.length + loading.length);
  }
  return { loaded, loading, room };
}

export function onResidencyRead(
  state: WorkerState,
  read: BackendResidency | null,
): WorkerAction[] {
  const again = state.residencyProbe === "again";
  state.residencyProbe = again ? "due" : "idle";
  if (read !== null) state.backendHolds = read;
  const out: WorkerAction[] = [];
  const frame = speaksResidency(state) ? residencyFrame(state, read) : null;
  if (frame !== null) {
    const json = JSON.stringify(frame);
    if (json !== state.residencySent) {
      state.residencySent = json;
      out.push(send({
        type: "residency",
        loaded: frame.loaded,
        loading: frame.loading,
        ...(frame.room === null ? {} : { room: frame.room }),
      }));
    }
  }
  // The read asked meanwhile: on the residency timer, RESIDENCY_GAP_MS on.
  if (again) {
    out.push({ kind: "armTimer", timer: "residency", ms: RESIDENCY_GAP_MS });
  }
  return out;
}
