import assert from "node:assert/strict";
import type { LifecycleTaskView } from "../vocabulary.ts";
import { taskDocument } from "./lifecycle_task.ts";

function task(overrides: Partial<LifecycleTaskView> = {}): LifecycleTaskView {
  return {
    id: "load-1",
    operation: "model-load",
    modelId: "m",
    params: {},
    createdAtMs: 1_000,
    updatedAtMs: 1_000,
    finishedAtMs: null,
    status: "running",
    progress: 0.33333,
    error: null,
    parts: [{
      workerId: "w1",
      workerName: "gpu-1",
      status: "running",
      progress: 0.33333,
      error: null,
      result: null,
      deadlineAtMs: 9_000,
    }],
    ...overrides,
  };
}

Deno.test("a running load reads as loading, progress rounded, no load time yet", () => {
  const doc = taskDocument(task());
  assert.equal(doc.status, "loading");
  assert.equal(doc.progress, 0.333);
  assert.equal(doc.loadTimeMs, null);
  assert.deepEqual(doc.workers, [{
    workerId: "w1",
    name: "gpu-1",
    status: "running",
    progress: 0.33333,
  }]);
});

Deno.test("a finished load sums the workers' results, else measures its own time", () => {
  const part = task().parts[0]!;
  const done = task({
    status: "completed",
    finishedAtMs: 3_500,
    progress: 1,
    parts: [{ ...part, status: "completed", result: { gpuMemoryUsedMB: 5 } }],
  });
  const doc = taskDocument(done);
  assert.equal(doc.status, "completed");
  assert.equal(doc.gpuMemoryUsedMB, 5);
  assert.equal(doc.loadTimeMs, 2_500);
});

Deno.test("a running flush reads as running and has no load fields", () => {
  const doc = taskDocument(task({ operation: "cache-flush", modelId: null }));
  assert.equal(doc.status, "running");
  assert.equal("loadTimeMs" in doc, false);
});
