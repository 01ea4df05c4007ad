// lifecycle_progress (extension lifecycle-v1): a worker reports progress or the
// end of its part of a task. Reports for unknown tasks, other workers' parts or
// parts already ended are ignored (a late report after a timeout, a stale task).
import type { Effect } from "../effect.ts";
import { taskChanged } from "../state/lifecycle.ts";
import type { State } from "../state/state.ts";
import type { Event } from "./event.ts";

type E = Extract<Event, { kind: "lifecycleProgressReceived" }>;

export function onLifecycleProgressReceived(
  state: State,
  e: E,
  out: Effect[],
): void {
  const task = state.lifecycleTasks.get(e.taskId);
  const part = task?.parts.find((p) => p.workerId === e.workerId);
  if (task === undefined || part === undefined || part.status !== "running") {
    out.push({
      kind: "log",
      level: "debug",
      message: "ignored lifecycle progress for no running task part",
      fields: { worker_id: e.workerId, task_id: e.taskId, status: e.status },
    });
    return;
  }
  if (e.progress !== null) part.progress = Math.min(1, Math.max(0, e.progress));
  if (e.result !== null) part.result = e.result;
  if (e.status === "completed") {
    part.status = "completed";
    part.progress = 1;
  } else if (e.status === "failed") {
    part.status = "failed";
    part.error = e.error ?? "the worker reported a failure";
  }
  taskChanged(state, task, out);
}
