// The HTTP answer to a lifecycle call, from the `replyLifecycle` effect the core
// decided: spec 004's documents for a started load, a finished unload or flush,
// or a task still running when the caller's wait ran out; an error when the task
// failed. The shell only writes it (run_effects.ts).
import { apiError } from "../protocol/errors.ts";
import type { LifecycleReplyKind } from "../effect.ts";
import type { ClientError, LifecycleTaskView } from "../vocabulary.ts";
import { taskDocument } from "./lifecycle_task.ts";

export type LifecycleAnswer =
  | { kind: "document"; status: number; body: Record<string, unknown> }
  /** An operator error (OpenAI shape) with `extra` beside `error` in the body. */
  | { kind: "refusal"; error: ClientError; extra: Record<string, unknown> };

const TASK_LOST: ClientError = apiError("task_lost", {
  detail: "the task was not recorded",
});

export function lifecycleAnswer(
  reply: LifecycleReplyKind,
  task: LifecycleTaskView,
): LifecycleAnswer {
  switch (reply) {
    case "accepted": {
      const doc = taskDocument(task);
      return {
        kind: "document",
        status: 202,
        body: {
          taskId: task.id,
          status: "loading",
          progress: doc.progress,
          eta: doc.eta,
          modelId: task.modelId,
          workers: doc.workers,
        },
      };
    }
    case "refused":
      return {
        kind: "refusal",
        error: task.error ?? TASK_LOST,
        extra: { taskId: task.id },
      };
    case "pending":
      return { kind: "document", status: 202, body: taskDocument(task) };
    case "finished":
      if (task.status === "failed" && task.error !== null) {
        return {
          kind: "refusal",
          error: task.error,
          extra: { task: taskDocument(task) },
        };
      }
      return { kind: "document", status: 200, body: finishedBody(task) };
  }
}

/** Spec 004's answer for a task that ended: what the workers freed or flushed, summed. */
function finishedBody(t: LifecycleTaskView): Record<string, unknown> {
  const results = t.parts.map((p) => p.result ?? {});
  const sum = (k: string) =>
    results.reduce(
      (a, r) => a + (typeof r[k] === "number" ? r[k] as number : 0),
      0,
    );
  const workers = taskDocument(t).workers;
  switch (t.operation) {
    case "model-unload":
      return {
        modelId: t.modelId,
        gpuMemoryFreedMB: sum("gpuMemoryFreedMB"),
        kvCacheFlushed: results.every((r) => r.kvCacheFlushed !== false),
        taskId: t.id,
        workers,
      };
    case "cache-flush":
      return {
        flushed: true,
        entriesRemoved: sum("entriesRemoved"),
        memoryFreedMB: sum("memoryFreedMB"),
        taskId: t.id,
        workers,
      };
    case "model-load":
      // A load is polled, never awaited; should one be, its document says all.
      return taskDocument(t);
  }
}
