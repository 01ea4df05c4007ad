// Lifecycle tasks (issue 9, spec 004 governed operations): a bounded table of
// model-load / model-unload / cache-flush tasks, which workers each one goes to,
// and how the parts' progress folds into the task's. The shell verified the op
// token before the event reached the core; here only routing and bookkeeping.
import { apiError } from "../protocol/errors.ts";
import type { Effect } from "../effect.ts";
import type {
  ClientError,
  LifecyclePart,
  LifecycleTask,
  LifecycleTaskView,
  WorkerId,
} from "../vocabulary.ts";
import {
  EXTENSION_LIFECYCLE,
  type LifecycleOperation,
} from "../protocol/messages.ts";
import type { State, Worker } from "./state.ts";
import { effectiveLoad } from "./workers.ts";

export function taskView(task: LifecycleTask): LifecycleTaskView {
  return { ...task, parts: task.parts.map((p) => ({ ...p })) };
}

export function lifecycleTaskView(
  state: State,
  taskId: string,
): LifecycleTaskView | null {
  const t = state.lifecycleTasks.get(taskId);
  return t === undefined ? null : taskView(t);
}

/** The worker negotiated lifecycle-v1 and takes new work. */
export function lifecycleCapable(w: Worker): boolean {
  return !w.draining && w.extensions.includes(EXTENSION_LIFECYCLE);
}

/** Loaded (acked, or reported loaded/loading in its capabilities) on this worker. */
export function workerHasModel(w: Worker, model: string): boolean {
  if (w.modelSet.has(model)) return true;
  const m = w.capabilities?.models;
  return m?.loaded?.some((x) => x.id === model) === true ||
    m?.loading?.some((x) => x.id === model) === true;
}

function workerOffersModel(w: Worker, model: string): boolean {
  return w.capabilities?.models?.available?.includes(model) === true;
}

export type Targets = { ok: true; workers: Worker[] } | {
  ok: false;
  error: ClientError;
};

const NO_CAPABLE_WORKER =
  "connect a modelrelay worker (it negotiates the lifecycle-v1 extension) whose backend can load and unload models: a spec 004 runner, Ollama, or llama-server in router mode";

function fail(error: ClientError): Targets {
  return { ok: false, error };
}

/**
 * Which workers carry an operation: model-load goes to the requested worker,
 * else to the least-loaded capable worker (those listing the model as available
 * first); unload and model-scoped flush go to every capable worker that has the
 * model; other flushes to every capable worker.
 */
export function lifecycleTargets(
  state: State,
  operation: LifecycleOperation,
  modelId: string | null,
  scope: string,
  workerId: WorkerId | null,
): Targets {
  if (workerId !== null) {
    const w = state.workers.get(workerId);
    if (w === undefined) {
      return fail(apiError("worker_not_found", { id: workerId }));
    }
    if (!lifecycleCapable(w)) {
      return fail(apiError("lifecycle_not_supported", {
        detail: `worker "${w.name}" (${w.id}) cannot carry ${operation}: ${
          w.draining
            ? "it is draining"
            : "it did not negotiate the lifecycle-v1 extension (an original or older worker)"
        }`,
      }));
    }
    return { ok: true, workers: [w] };
  }
  const capable = [...state.workers.values()].filter(lifecycleCapable);
  if (capable.length === 0) {
    return fail(apiError("lifecycle_not_supported", {
      detail: `no connected worker supports ${operation}: ${NO_CAPABLE_WORKER}`,
    }));
  }
  if (operation === "model-load") {
    const model = modelId ?? "";
    const offering = capable.filter((w) => workerOffersModel(w, model));
    const pool = offering.length > 0 ? offering : capable;
    let best = pool[0]!;
    for (const w of pool) {
      if (effectiveLoad(w) < effectiveLoad(best)) best = w;
    }
    return { ok: true, workers: [best] };
  }
  if (operation === "model-unload" || scope === "model") {
    const model = modelId ?? "";
    const holders = capable.filter((w) => workerHasModel(w, model));
    if (holders.length === 0) {
      return fail(apiError("model_not_loaded", { model, operation }));
    }
    return { ok: true, workers: holders };
  }
  return { ok: true, workers: capable };
}

/** Folds the parts into the task; returns true when the task just finished. */
export function settleTask(task: LifecycleTask, nowMs: number): boolean {
  task.updatedAtMs = nowMs;
  if (task.status !== "running") return false;
  let sum = 0;
  let running = 0;
  const failed: LifecyclePart[] = [];
  for (const p of task.parts) {
    sum += p.status === "completed" ? 1 : p.progress;
    if (p.status === "running") running++;
    if (p.status === "failed") failed.push(p);
  }
  task.progress = task.parts.length === 0 ? 1 : sum / task.parts.length;
  if (running > 0) return false;
  task.finishedAtMs = nowMs;
  if (failed.length === 0) {
    task.status = "completed";
    task.progress = 1;
    return true;
  }
  task.status = "failed";
  // A status the workers agree on (501: the backend lacks the operation) is kept.
  const statuses = new Set(failed.map((p) => {
    const s = p.result?.status;
    return typeof s === "number" && s >= 400 && s <= 599 ? s : 502;
  }));
  const status = statuses.size === 1 ? [...statuses][0]! : 502;
  const detail =
    `${task.operation} failed on ${failed.length} of ${task.parts.length} worker(s): ${
      failed.map((p) => `${p.workerName}: ${p.error ?? "failed"}`).join("; ")
    }`;
  task.error = status === 501
    ? apiError("lifecycle_not_supported", { detail })
    : apiError("lifecycle_failed", { detail, status });
  return true;
}

/** Drops the oldest finished tasks beyond the bound (running ones are kept). */
export function evictFinishedTasks(state: State): void {
  const max = state.config.lifecycleTasksMax;
  if (state.lifecycleTasks.size <= max) return;
  for (const [id, t] of state.lifecycleTasks) {
    if (state.lifecycleTasks.size <= max) return;
    if (t.status !== "running") state.lifecycleTasks.delete(id);
  }
}

export function taskChanged(
  state: State,
  task: LifecycleTask,
  out: Effect[],
): void {
  const finished = settleTask(task, state.nowMs);
  const view = taskView(task);
  out.push({ kind: "lifecycleTaskChanged", task: view });
  if (finished) {
    if (state.lifecycleReplies.delete(task.id)) {
      out.push({ kind: "replyLifecycle", reply: "finished", task: view });
    }
    out.push({
      kind: "log",
      level: task.status === "completed" ? "info" : "warn",
      message: `lifecycle task ${task.status}`,
      fields: {
        task_id: task.id,
        operation: task.operation,
        model: task.modelId ?? "",
        ...(task.error === null ? {} : { error: task.error.message }),
      },
    });
    evictFinishedTasks(state);
  }
}

/** Fails a part that is still running (worker gone, deadline passed). */
export function failPart(part: LifecyclePart, error: string): void {
  part.status = "failed";
  part.error = error;
}

/** The worker left: its running parts fail (called from dropWorker). */
export function failWorkerLifecycleParts(
  state: State,
  workerId: WorkerId,
  cause: string,
  out: Effect[],
): void {
  for (const task of state.lifecycleTasks.values()) {
    if (task.status !== "running") continue;
    let changed = false;
    for (const p of task.parts) {
      if (p.workerId !== workerId || p.status !== "running") continue;
      failPart(p, `worker left before the operation ended (${cause})`);
      changed = true;
    }
    if (changed) taskChanged(state, task, out);
  }
}

/**
 * The caller of a task that just started: a load is answered at once (202, its
 * progress is polled); unload and flush callers wait for the end, at most
 * `lifecycleReplyWaitMs`, answered from taskChanged or expireLifecycleReplies.
 */
export function awaitLifecycleReply(
  state: State,
  task: LifecycleTask,
  out: Effect[],
): void {
  if (task.status !== "running") {
    out.push({
      kind: "replyLifecycle",
      reply: "refused",
      task: taskView(task),
    });
  } else if (task.operation === "model-load") {
    out.push({
      kind: "replyLifecycle",
      reply: "accepted",
      task: taskView(task),
    });
  } else {
    state.lifecycleReplies.set(
      task.id,
      state.nowMs + state.config.lifecycleReplyWaitMs,
    );
  }
}

/** Callers that waited `lifecycleReplyWaitMs` get the task as it stands (called on tick). */
export function expireLifecycleReplies(state: State, out: Effect[]): void {
  for (const [taskId, deadlineAtMs] of state.lifecycleReplies) {
    if (deadlineAtMs > state.nowMs) continue;
    state.lifecycleReplies.delete(taskId);
    const task = state.lifecycleTasks.get(taskId);
    if (task === undefined) continue; // only finished tasks are evicted, answered then
    out.push({
      kind: "replyLifecycle",
      reply: "pending",
      task: taskView(task),
    });
  }
}

/** Parts past their deadline fail (called on tick). */
export function expireLifecycleParts(state: State, out: Effect[]): void {
  for (const task of state.lifecycleTasks.values()) {
    if (task.status !== "running") continue;
    let changed = false;
    for (const p of task.parts) {
      if (p.status !== "running" || p.deadlineAtMs > state.nowMs) continue;
      failPart(
        p,
        `no final answer within ${
          Math.round(state.config.lifecycleTaskTimeoutMs / 1000)
        } s`,
      );
      changed = true;
    }
    if (changed) taskChanged(state, task, out);
  }
}

/** Model states for /v1/models and /v1/capabilities: loaded (acked or reported) and loading (tasks, reports). */
export type ModelStatus = {
  id: string;
  status: "loaded" | "loading";
  /** 0..1 while loading. */
  progress?: number;
  eta?: number;
  taskId?: string;
  workers: WorkerId[];
};

export function modelStatuses(
  state: State,
  only: Worker[] | null = null,
): ModelStatus[] {
  const byId = new Map<string, ModelStatus>();
  const add = (
    id: string,
    status: "loaded" | "loading",
    worker: WorkerId,
    extra: Partial<ModelStatus> = {},
  ) => {
    if (id === "*") return;
    let m = byId.get(id);
    if (m === undefined) {
      m = { id, status, workers: [] };
      byId.set(id, m);
    }
    if (status === "loaded") m.status = "loaded";
    if (m.status === "loading") Object.assign(m, extra);
    if (!m.workers.includes(worker)) m.workers.push(worker);
  };
  const workers = only ?? [...state.workers.values()];
  const ids = new Set(workers.map((w) => w.id));
  for (const w of workers) {
    for (const id of w.models) add(id, "loaded", w.id);
    for (const l of w.capabilities?.models?.loaded ?? []) {
      add(l.id, "loaded", w.id);
    }
    for (const l of w.capabilities?.models?.loading ?? []) {
      add(l.id, "loading", w.id, {
        progress: l.progress ?? 0,
        ...(l.eta == null ? {} : { eta: l.eta }),
      });
    }
  }
  for (const t of state.lifecycleTasks.values()) {
    if (
      t.status !== "running" || t.operation !== "model-load" ||
      t.modelId === null
    ) continue;
    for (const p of t.parts) {
      if (p.status !== "running" || !ids.has(p.workerId)) continue;
      add(t.modelId, "loading", p.workerId, {
        progress: p.progress,
        taskId: t.id,
      });
    }
  }
  return [...byId.values()];
}
