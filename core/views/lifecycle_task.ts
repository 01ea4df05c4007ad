// The spec's load-status document for any lifecycle task (load, unload or
// flush): GET /v1/models/load/{taskId}, and the body of a lifecycle answer that
// could not wait for the task to end.
import type { LifecycleTaskView } from "../vocabulary.ts";

export function taskDocument(t: LifecycleTaskView): Record<string, unknown> {
  const results = t.parts.map((p) => p.result ?? {});
  const sum = (k: string) => {
    const vals = results.map((r) => r[k]).filter((v) => typeof v === "number");
    return vals.length === 0
      ? null
      : (vals as number[]).reduce((a, b) => a + b, 0);
  };
  const status = t.status === "running"
    ? (t.operation === "model-load" ? "loading" : "running")
    : t.status;
  return {
    taskId: t.id,
    operation: t.operation,
    status,
    modelId: t.modelId,
    progress: Math.round(t.progress * 1000) / 1000,
    eta: sum("eta"),
    ...(t.operation === "model-load"
      ? {
        gpuMemoryUsedMB: sum("gpuMemoryUsedMB"),
        loadTimeMs: t.finishedAtMs === null
          ? null
          : sum("loadTimeMs") ?? Math.round(t.finishedAtMs - t.createdAtMs),
      }
      : {}),
    ...(t.error === null ? {} : { error: t.error.message }),
    workers: t.parts.map((p) => ({
      workerId: p.workerId,
      name: p.workerName,
      status: p.status,
      progress: p.progress,
      ...(p.error === null ? {} : { error: p.error }),
      ...(p.result === null ? {} : { result: p.result }),
    })),
  };
}
