// Spec 004 extension decisions of the worker: lifecycle tasks carried to the
// backend and capabilities reported, only on a connection that negotiated them.
import {
  EXTENSION_CAPABILITIES,
  EXTENSION_LIFECYCLE,
  type LifecycleRequestMessage,
  type RunnerCapabilities,
} from "../protocol/mod.ts";
import { probeResidency } from "./residency.ts";
import { log, modelsUpdate, send } from "./worker_actions.ts";
import type { WorkerAction, WorkerEvent, WorkerState } from "./worker_state.ts";

export function onLifecycleRequest(
  state: WorkerState,
  m: LifecycleRequestMessage,
): WorkerAction[] {
  if (!state.extensions.includes(EXTENSION_LIFECYCLE)) {
    return [
      log("warn", "ignored a lifecycle_request the proxy did not negotiate", {
        task_id: m.task_id,
      }),
    ];
  }
  if (state.lifecycle.has(m.task_id)) return [];
  const modelId = typeof m.params.modelId === "string" ? m.params.modelId : "";
  state.lifecycle.set(m.task_id, { operation: m.operation, modelId });
  return [
    log("info", "lifecycle operation", {
      task_id: m.task_id,
      operation: m.operation,
      model: modelId,
    }),
    send({
      type: "lifecycle_progress",
      task_id: m.task_id,
      status: "running",
      progress: 0,
    }),
    { kind: "runLifecycle", request: m },
  ];
}

export function onLifecycleUpdate(
  state: WorkerState,
  e: Extract<WorkerEvent, { kind: "lifecycleUpdate" }>,
): WorkerAction[] {
  const task = state.lifecycle.get(e.taskId);
  if (task === undefined) return [];
  const out: WorkerAction[] = [];
  if (state.registered && state.extensions.includes(EXTENSION_LIFECYCLE)) {
    out.push(send({
      type: "lifecycle_progress",
      task_id: e.taskId,
      status: e.status,
      ...(e.progress === null ? {} : { progress: e.progress }),
      ...(e.error === null ? {} : { error: e.error }),
      ...(e.result === null ? {} : { result: e.result }),
    }));
  }
  if (e.status === "running") return out;
  state.lifecycle.delete(e.taskId);
  out.push(
    log(e.status === "completed" ? "info" : "warn", `lifecycle ${e.status}`, {
      task_id: e.taskId,
      operation: task.operation,
      ...(e.error === null ? {} : { error: e.error }),
    }),
  );
  if (e.status !== "completed" || task.operation === "cache-flush") {
    return out;
  }
  // Issue 30: a load or unload changed what the backend holds.
  out.push(...probeResidency(state));
  // The backend's models changed: tell the proxy, and refresh capabilities.
  if (state.modelsDiscovered) out.push({ kind: "listModels", reply: true });
  else if (task.modelId !== "") {
    const has = state.models.includes(task.modelId);
    if (task.operation === "model-load" && !has) {
      state.models = [...state.models, task.modelId];
    } else if (task.operation === "model-unload" && has) {
      state.models = state.models.filter((x) => x !== task.modelId);
    }
    if (state.registered && state.drain.kind === "none") {
      out.push(modelsUpdate(state));
    }
  }
  if (state.extensions.includes(EXTENSION_CAPABILITIES)) {
    out.push({ kind: "probeCapabilities" });
  }
  return out;
}

export function onCapabilitiesRead(
  state: WorkerState,
  capabilities: RunnerCapabilities,
): WorkerAction[] {
  if (
    !state.registered || !state.extensions.includes(EXTENSION_CAPABILITIES)
  ) return [];
  const json = JSON.stringify(capabilities);
  if (json === state.capabilitiesSent) return [];
  state.capabilitiesSent = json;
  return [send({ type: "capabilities", capabilities })];
}
