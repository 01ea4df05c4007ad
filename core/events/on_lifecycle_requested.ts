// A verified lifecycle operation (issue 9): pick the workers that carry it, send
// each a lifecycle_request (only workers that negotiated lifecycle-v1 are ever
// picked), or fail the task at once when nothing can carry it (501 names what is
// missing). Either way the task is recorded and a lifecycleTaskChanged effect
// tells the shell; a waiting caller is answered by a replyLifecycle effect, at
// once or when the task ends (or its reply wait runs out, on tick).
import { apiError, shuttingDown } from "../protocol/errors.ts";
import type { Effect } from "../effect.ts";
import {
  awaitLifecycleReply,
  evictFinishedTasks,
  lifecycleTargets,
  taskChanged,
  taskView,
} from "../state/lifecycle.ts";
import type { State } from "../state/state.ts";
import type { LifecycleTask } from "../vocabulary.ts";
import type { Event } from "./event.ts";

type E = Extract<Event, { kind: "lifecycleRequested" }>;

export function onLifecycleRequested(
  state: State,
  e: E,
  out: Effect[],
): void {
  const existing = state.lifecycleTasks.get(e.taskId);
  if (existing !== undefined) return duplicateTask(existing, e, out);
  const scope = typeof e.params.scope === "string"
    ? e.params.scope
    : e.modelId === null
    ? "all"
    : "model";
  const targets = state.shuttingDown
    ? { ok: false as const, error: shuttingDown(state.config) }
    : lifecycleTargets(state, e.operation, e.modelId, scope, e.workerId);
  const task: LifecycleTask = {
    id: e.taskId,
    operation: e.operation,
    modelId: e.modelId,
    params: e.params,
    createdAtMs: e.atMs,
    updatedAtMs: e.atMs,
    finishedAtMs: null,
    status: "running",
    progress: 0,
    error: null,
    parts: [],
  };
  state.lifecycleTasks.set(task.id, task);
  if (!targets.ok) {
    task.status = "failed";
    task.finishedAtMs = e.atMs;
    task.error = targets.error;
    out.push({ kind: "lifecycleTaskChanged", task: { ...task, parts: [] } });
    if (e.replyWanted) awaitLifecycleReply(state, task, out);
    evictFinishedTasks(state);
    return;
  }
  const params = e.modelId === null
    ? e.params
    : { ...e.params, modelId: e.modelId };
  for (const w of targets.workers) {
    task.parts.push({
      workerId: w.id,
      workerName: w.name,
      status: "running",
      progress: 0,
      error: null,
      result: null,
      deadlineAtMs: e.atMs + state.config.lifecycleTaskTimeoutMs,
    });
    out.push({
      kind: "sendToWorker",
      workerId: w.id,
      message: {
        type: "lifecycle_request",
        task_id: task.id,
        operation: e.operation,
        params,
      },
    });
  }
  out.push({
    kind: "log",
    level: "info",
    message: "lifecycle task started",
    fields: {
      task_id: task.id,
      operation: task.operation,
      model: task.modelId ?? "",
      workers: targets.workers.map((w) => w.id).join(","),
    },
  });
  taskChanged(state, task, out);
  if (e.replyWanted) awaitLifecycleReply(state, task, out);
}

/** A task id already in use: logged as the shell bug it is, and the caller still answered. */
function duplicateTask(existing: LifecycleTask, e: E, out: Effect[]): void {
  out.push({
    kind: "log",
    level: "error",
    message: "duplicate lifecycle task id ignored",
    fields: { task_id: e.taskId },
  });
  // Ids are random (shell/server/ids.ts): a duplicate is a shell bug, and
  // its caller is still owed an answer.
  if (!e.replyWanted) return;
  out.push({
    kind: "replyLifecycle",
    reply: "refused",
    task: {
      ...taskView(existing),
      error: apiError("task_lost", {
        detail: "the task id is already in use",
      }),
    },
  });
}
