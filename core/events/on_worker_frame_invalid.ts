// A malformed, unknown, binary or oversized frame (C33, C41): the offending worker
// is closed with a protocol error (1002); its requests are requeued like on any
// disconnect. Nothing else is touched and nothing throws.
import type { Effect } from "../effect.ts";
import { closeAndDrop } from "../state/drop_worker.ts";
import type { State } from "../state/state.ts";
import type { Event } from "./event.ts";

type E = Extract<Event, { kind: "workerFrameInvalid" }>;

export function protocolViolation(
  state: State,
  workerId: string,
  reason: string,
  out: Effect[],
): void {
  out.push({
    kind: "log",
    level: "warn",
    message: "protocol error",
    fields: { worker_id: workerId, reason },
  });
  const worker = state.workers.get(workerId);
  if (worker !== undefined) {
    return closeAndDrop(state, worker, 1002, `protocol error: ${reason}`, out);
  }
  if (state.pending.delete(workerId)) {
    out.push({
      kind: "closeWorker",
      workerId,
      code: 1002,
      reason: `protocol error: ${reason}`,
    });
  }
}

export function onWorkerFrameInvalid(state: State, e: E, out: Effect[]): void {
  protocolViolation(state, e.workerId, e.error.message, out);
}
