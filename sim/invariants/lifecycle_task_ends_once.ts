// lifecycleTaskEndsOnce (I9): every lifecycle task ends (completed or failed)
// exactly once: on its worker's final report, when its worker leaves, or by
// lifecycleTaskTimeoutMs plus one tick.
import type { Event, LifecycleTaskView } from "../../core/mod.ts";
import type { LifecycleRequested, Model } from "../model/model.ts";
import type { Check } from "./catalog.ts";
import {
  partsOnlyWhereSent,
  refusedOnlyWithoutCarrier,
} from "./lifecycle_only_to_capable.ts";

export function taskIdFresh(
  m: Model,
  check: Check,
  e: LifecycleRequested,
): void {
  check(
    !m.tasks.has(e.taskId),
    "lifecycleTaskEndsOnce",
    () => `lifecycle task id "${e.taskId}" reused`,
  );
}

/**
 * lifecycleTaskChanged: each part moves from running to its end once and for a
 * reason (its report, its worker leaving, the timeout); the task ends once, as
 * its parts say. Counts the ends for the scenario tests.
 */
export function taskChangedOnce(
  m: Model,
  check: Check,
  v: LifecycleTaskView,
): void {
  const t = m.tasks.get(v.id);
  check(
    t !== undefined && !t.ended,
    "lifecycleTaskEndsOnce",
    () =>
      `lifecycleTaskChanged for ${
        t === undefined ? "unknown" : "already ended"
      } task ${v.id} (${v.status})`,
  );
  if (t === undefined || t.ended) return;
  m.tasksChangedNow.add(t.id);
  const e = m.event!;
  partsOnlyWhereSent(check, t, v);
  let running = 0;
  for (const p of v.parts) {
    const before = t.parts.get(p.workerId) ?? "running";
    if (p.status === "running") running++;
    if (before !== "running") {
      check(
        p.status === before,
        "lifecycleTaskEndsOnce",
        () =>
          `${t.id} part on ${p.workerId} went from ${before} to ${p.status}`,
      );
    } else if (p.status === "completed") {
      check(
        e.kind === "lifecycleProgressReceived" && e.taskId === t.id &&
          e.workerId === p.workerId && e.status === "completed",
        "lifecycleTaskEndsOnce",
        () =>
          `${t.id} part on ${p.workerId} completed on ${e.kind} without its worker's report`,
      );
    } else if (p.status === "failed") {
      const reported = e.kind === "lifecycleProgressReceived" &&
        e.taskId === t.id && e.workerId === p.workerId &&
        e.status === "failed";
      const left = m.droppedConns.has(p.workerId);
      const timedOut = e.kind === "tick" &&
        e.atMs >= t.createdAtMs + m.c.lifecycleTaskTimeoutMs;
      if (left) m.lifecycle.workerLeft++;
      if (timedOut && !reported && !left) m.lifecycle.timedOut++;
      check(
        reported || left || timedOut,
        "lifecycleTaskEndsOnce",
        () =>
          `${t.id} part on ${p.workerId} failed on ${e.kind} at ${e.atMs} (created ${t.createdAtMs}) without a report, a disconnect or its timeout`,
      );
    }
    t.parts.set(p.workerId, p.status);
  }
  if (v.status === "running") {
    check(
      running > 0,
      "lifecycleTaskEndsOnce",
      () => `${t.id} still running with no running part`,
    );
    return;
  }
  t.ended = true;
  m.openTasks--;
  if (v.status === "completed") m.lifecycle.completed++;
  else m.lifecycle.failed++;
  check(
    running === 0 && (v.status === "failed" || v.parts.length > 0) &&
      (v.status !== "completed" ||
        v.parts.every((p) => p.status === "completed")) &&
      (v.status !== "failed" || v.error !== null),
    "lifecycleTaskEndsOnce",
    () =>
      `${t.id} ended ${v.status} with parts ${
        v.parts.map((p) => `${p.workerId}:${p.status}`)
      } (error ${v.error?.code})`,
  );
  if (v.parts.length === 0 && e.kind === "lifecycleRequested") {
    m.lifecycle.refused++;
    refusedOnlyWithoutCarrier(m, check, t, v, e);
  }
}

/** After the step: a request got its task view, and a final report ended its part. */
export function requestedAndReportedSeen(
  m: Model,
  check: Check,
  e: Event,
): void {
  if (e.kind === "lifecycleRequested") {
    check(
      m.tasksChangedNow.has(e.taskId),
      "lifecycleTaskEndsOnce",
      () => `${e.taskId} requested without a lifecycleTaskChanged`,
    );
  }
  const fr = m.finalReport;
  if (fr !== null) {
    check(
      fr.task.parts.get(fr.conn) === fr.status,
      "lifecycleTaskEndsOnce",
      () =>
        `${fr.conn} reported ${fr.task.id} ${fr.status}, but its part is ${
          fr.task.parts.get(fr.conn)
        }`,
    );
  }
}

/** After the step: no part runs on a worker that left, and no task outlives its timeout. */
export function noPartOutlivesWorkerOrTimeout(
  m: Model,
  check: Check,
  e: Event,
): void {
  if (m.openTasks === 0) return;
  const ticked = e.kind === "tick";
  if (!ticked && m.droppedConns.size === 0) return;
  for (const t of m.tasks.values()) {
    if (t.ended) continue;
    for (const conn of t.sent) {
      check(
        !m.droppedConns.has(conn) || t.parts.get(conn) !== "running",
        "lifecycleTaskEndsOnce",
        () => `${t.id} part on ${conn} still running after its worker left`,
      );
    }
    check(
      !ticked || t.createdAtMs + m.c.lifecycleTaskTimeoutMs > e.atMs,
      "lifecycleTaskEndsOnce",
      () =>
        `${t.id} (${t.operation}, created ${t.createdAtMs}) still running at tick ${e.atMs}, past its ${m.c.lifecycleTaskTimeoutMs} ms timeout`,
    );
  }
}
