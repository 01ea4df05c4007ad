// Time passes (conventions §4): every deadline in state is checked here, so each
// timing guarantee reads "no later than its deadline plus one tick".
// Cost per tick is linear in workers and open requests; nothing per chunk.
import type { ClientError } from "../vocabulary.ts";
import { apiError, shuttingDown } from "../protocol/errors.ts";
import type { Effect } from "../effect.ts";
import { closeAndDrop, closeIfDrained } from "../state/drop_worker.ts";
import { cancelOnWorker, fail, pumpQueue } from "../state/requests.ts";
import type { Request, State, Worker } from "../state/state.ts";
import { recentAuthFailures } from "./on_worker_connect_attempted.ts";
import type { Event } from "./event.ts";
import { pruneRateWindows } from "../state/rate_limit.ts";
import { pruneTokenWindows } from "../state/token_limit.ts";
import {
  expireLifecycleParts,
  expireLifecycleReplies,
} from "../state/lifecycle.ts";
import { syncRoute } from "../state/workers.ts";
import { watchBodiesSending } from "../state/body_budget.ts";
import { checkBackendCoolDown } from "../state/backend_circuit.ts";
import { writeWaitLines } from "../state/wait_lines.ts";

type E = Extract<Event, { kind: "tick" }>;

function checkWorker(
  state: State,
  w: Worker,
  unixMs: number,
  out: Effect[],
): void {
  const now = state.nowMs;
  if (now - w.lastHeartbeatAtMs >= state.config.heartbeatTimeoutMs) {
    out.push({
      kind: "log",
      level: "warn",
      message: "worker heartbeat timed out",
      fields: { worker_id: w.id, worker_name: w.name },
    });
    return closeAndDrop(state, w, 1000, "worker heartbeat timed out", out);
  }
  if (w.drainDeadlineAtMs !== null && now >= w.drainDeadlineAtMs) {
    return closeAndDrop(state, w, 1000, "drain timeout reached", out);
  }
  for (const [id, graceEndsAtMs] of w.cancelling) {
    if (now >= graceEndsAtMs) w.cancelling.delete(id); // C44: never acked, slot freed
  }
  syncRoute(state, w);
  // C43: pings go out on schedule, busy streaming or not.
  if (now >= w.nextPingAtMs) {
    w.nextPingAtMs = now + state.config.heartbeatIntervalMs;
    out.push({
      kind: "sendToWorker",
      workerId: w.id,
      message: { type: "ping", timestamp_unix_ms: unixMs },
    });
  }
}

function timeOut(
  state: State,
  r: Request,
  error: ClientError,
  out: Effect[],
  reason: "timeout" | "server_shutdown" = "timeout",
): void {
  const worker = r.status.kind === "queued"
    ? undefined
    : state.workers.get(r.status.workerId);
  if (worker !== undefined) cancelOnWorker(state, worker, r, reason, out);
  out.push({
    kind: "log",
    level: "warn",
    message: error.code.replace("_", " "),
    fields: { request_id: r.id },
  });
  fail(state, r, error, "failed", out);
  // C28: a draining worker whose last request timed out is idle now.
  if (worker !== undefined) closeIfDrained(state, worker, out);
}

function checkRequest(state: State, r: Request, out: Effect[]): void {
  const now = state.nowMs;
  const s = r.status;
  switch (s.kind) {
    case "queued":
      // C12: never reached a worker, so no cancel.
      if (now >= s.queueDeadlineAtMs) {
        timeOut(
          state,
          r,
          apiError("queue_timeout"),
          out,
        );
      }
      return;
    case "dispatched":
      // C19/C48: until the first byte, the limit counts from arrival.
      if (now >= r.deadlineAtMs) {
        timeOut(
          state,
          r,
          apiError("request_timeout", {}),
          out,
        );
      }
      return;
    case "streaming":
      // C48: once streaming, an idle limit; a stream that keeps flowing is never cut.
      if (now - s.lastChunkAtMs >= state.config.requestTimeoutMs) {
        const secs = Math.round(state.config.requestTimeoutMs / 1000);
        timeOut(
          state,
          r,
          apiError("request_timeout", { idleSecs: secs }),
          out,
        );
      }
      return;
  }
}

export function onTick(state: State, e: E, out: Effect[]): void {
  if (state.bodiesSending.size > 0) watchBodiesSending(state, out);
  for (const p of [...state.pending.values()]) {
    if (state.nowMs < p.registerDeadlineAtMs) continue;
    state.pending.delete(p.id);
    const secs = Math.round(state.config.registerTimeoutMs / 1000);
    out.push({
      kind: "closeWorker",
      workerId: p.id,
      code: 1002,
      reason: `no register message within ${secs} s`,
    });
  }
  // Server shutdown deadline first: its requests end with 503 shutting_down and a
  // cancel "server_shutdown" (C21, C30), not as losses of workers whose drain ends now.
  if (
    state.shuttingDown && state.shutdownDeadlineAtMs !== null &&
    state.nowMs >= state.shutdownDeadlineAtMs
  ) {
    for (const r of [...state.requests.values()]) {
      timeOut(
        state,
        r,
        shuttingDown(state.config),
        out,
        "server_shutdown",
      );
    }
    for (const w of [...state.workers.values()]) {
      closeAndDrop(state, w, 1001, "server shutting down", out);
    }
  }
  // The wire field is a Unix time (the original's meaning); without a wall clock
  // (the simulator) the event time stands in.
  const unixMs = e.unixMs ?? state.nowMs;
  // Backend cool-downs end before any worker is dropped below, so a request
  // requeued by a drop in this tick sees every worker whose trial is due
  // (found by the simulator: a wildcard got it over a free exact match).
  for (const w of state.workers.values()) checkBackendCoolDown(state, w);
  for (const w of [...state.workers.values()]) {
    checkWorker(state, w, unixMs, out);
  }
  for (const r of [...state.requests.values()]) checkRequest(state, r, out);
  writeWaitLines(state, out);
  for (const ip of [...state.authFailures.keys()]) {
    recentAuthFailures(state, ip);
  }
  pruneRateWindows(state);
  pruneTokenWindows(state);
  if (state.lifecycleTasks.size > 0) expireLifecycleParts(state, out);
  // After the parts: a task that just failed by its deadline answers "finished".
  if (state.lifecycleReplies.size > 0) expireLifecycleReplies(state, out);
  for (const [provider, q] of state.queues) {
    if (q.length > 0) pumpQueue(state, provider, out);
  }
}
