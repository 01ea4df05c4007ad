import assert from "node:assert/strict";
import { taskView } from "../_testing.ts";
import type { LifecycleTaskView } from "../vocabulary.ts";
import { taskDocument } from "./lifecycle_task.ts";

/** A load a third of the way, started at 1 s, its part's deadline at 9 s. */
function task(overrides: Partial<LifecycleTaskView> = {}): LifecycleTaskView {
  return taskView(
    { createdAtMs: 1_000, updatedAtMs: 1_000, progress: 0.33333, ...overrides },
    { progress: 0.33333, deadlineAtMs: 9_000 },
  );
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
