import assert from "node:assert/strict";
import { taskView } from "../_testing.ts";
import type { LifecycleTaskView } from "../vocabulary.ts";
import { lifecycleAnswer } from "./lifecycle_reply.ts";

/** An unload under way (the answers' own task). */
function task(overrides: Partial<LifecycleTaskView> = {}): LifecycleTaskView {
  return taskView({ id: "unload-1", operation: "model-unload", ...overrides });
}

Deno.test("a started load is answered 202 loading with its task id", () => {
  const answer = lifecycleAnswer(
    "accepted",
    task({ id: "load-1", operation: "model-load" }),
  );
  assert.equal(answer.kind, "document");
  if (answer.kind !== "document") return;
  assert.equal(answer.status, 202);
  assert.equal(answer.body.taskId, "load-1");
  assert.equal(answer.body.status, "loading");
  assert.equal(answer.body.modelId, "m");
});

Deno.test("a finished unload sums what the workers freed", () => {
  const part = task().parts[0]!;
  const done = task({
    status: "completed",
    parts: [
      { ...part, status: "completed", result: { gpuMemoryFreedMB: 3 } },
      { ...part, workerId: "w2", status: "completed", result: {} },
    ],
  });
  const answer = lifecycleAnswer("finished", done);
  assert.equal(answer.kind, "document");
  if (answer.kind !== "document") return;
  assert.equal(answer.status, 200);
  assert.equal(answer.body.gpuMemoryFreedMB, 3);
  assert.equal(answer.body.kvCacheFlushed, true);
});

Deno.test("a failed task is refused with its error: at once with the task id, later with the task", () => {
  const error = { status: 501, code: "lifecycle_not_supported", message: "x" };
  const failed = task({ status: "failed", error, parts: [] });
  assert.deepEqual(lifecycleAnswer("refused", failed), {
    kind: "refusal",
    error,
    extra: { taskId: "unload-1" },
  });
  const later = lifecycleAnswer("finished", failed);
  assert.equal(later.kind, "refusal");
  assert.ok(later.kind === "refusal" && "task" in later.extra);
});

Deno.test("a caller whose wait ran out gets 202 and the task document", () => {
  const answer = lifecycleAnswer("pending", task());
  assert.equal(answer.kind, "document");
  if (answer.kind !== "document") return;
  assert.equal(answer.status, 202);
  assert.equal(answer.body.status, "running");
});
