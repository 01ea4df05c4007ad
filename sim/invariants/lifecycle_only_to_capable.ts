// lifecycleOnlyToCapable (I9): lifecycle operations go only to registered,
// non-draining workers that negotiated lifecycle-v1 (the named target if any;
// holders of the model for unload and model flush), and are refused only when
// no such worker exists.
import type { LifecycleOperation, LifecycleTaskView } from "../../core/mod.ts";
import type {
  LifecycleRequested,
  Model,
  MTask,
  MWorker,
} from "../model/model.ts";
import type { Check } from "./catalog.ts";

/** A lifecycle_request went to `conn`: on its own request, once, to a capable worker; noted as sent. */
export function sentOnlyToCapable(
  m: Model,
  check: Check,
  conn: string,
  w: MWorker | undefined,
  taskId: string,
  operation: LifecycleOperation,
  params: Record<string, unknown>,
): void {
  const e = m.event;
  const t = m.tasks.get(taskId);
  check(
    e?.kind === "lifecycleRequested" && e.taskId === taskId &&
      e.operation === operation && t !== undefined && !t.sent.has(conn),
    "lifecycleOnlyToCapable",
    () =>
      `lifecycle_request ${taskId} (${operation}) to ${conn} on ${e?.kind} (not its own lifecycleRequested, or sent twice)`,
  );
  if (t === undefined || e?.kind !== "lifecycleRequested") return;
  m.lifecycle.sent++;
  t.sent.add(conn);
  check(
    w !== undefined && m.capable(w),
    "lifecycleOnlyToCapable",
    () =>
      `${taskId} (${operation}) sent to ${conn}, which is ${
        w === undefined
          ? "not connected"
          : !w.registered
          ? "not registered"
          : w.draining
          ? "draining"
          : "not lifecycle-v1"
      }`,
  );
  check(
    e.workerId === null || e.workerId === conn,
    "lifecycleOnlyToCapable",
    () => `${taskId} (${operation}) for ${e.workerId} went to ${conn}`,
  );
  check(
    e.modelId === null || params.modelId === e.modelId,
    "lifecycleOnlyToCapable",
    () =>
      `${taskId} for model ${e.modelId} sent with params.modelId ${params.modelId}`,
  );
  const modelScoped = operation === "model-unload" ||
    (operation === "cache-flush" && m.scope(e) === "model");
  if (modelScoped && e.workerId === null && w !== undefined) {
    check(
      m.holds(w, e.modelId ?? ""),
      "lifecycleOnlyToCapable",
      () =>
        `${taskId} (${operation} ${e.modelId}) sent to ${conn}, which does not hold the model`,
    );
  }
}

/** The task's parts are exactly the workers it was sent to. */
export function partsOnlyWhereSent(
  check: Check,
  t: MTask,
  v: LifecycleTaskView,
): void {
  check(
    v.parts.length === t.sent.size &&
      v.parts.every((p) => t.sent.has(p.workerId)),
    "lifecycleOnlyToCapable",
    () =>
      `${t.id} has parts on ${
        v.parts.map((p) => p.workerId)
      } but was sent to ${[...t.sent]}`,
  );
}

/** A task refused at once (no parts): only when no capable worker could carry it. */
export function refusedOnlyWithoutCarrier(
  m: Model,
  check: Check,
  t: MTask,
  v: LifecycleTaskView,
  e: LifecycleRequested,
): void {
  check(
    !m.carrierExists(e),
    "lifecycleOnlyToCapable",
    () =>
      `${t.id} (${t.operation} ${t.model} target ${t.target}) refused ${v.error?.status} ${v.error?.code} while a capable worker is connected`,
  );
}
