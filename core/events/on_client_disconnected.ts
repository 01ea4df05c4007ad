// The client went away (C18) or cannot keep up (server issue: bounded buffers).
// Queued: removed at once, no cancel (no worker had it). Dispatched or streaming:
// `cancel` to the worker, whose slot stays reserved until it acknowledges (C44).
import { apiError } from "../protocol/errors.ts";
import type { Effect } from "../effect.ts";
import { releaseAfterCut } from "../state/cut_answer.ts";
import { cancelOnWorker, fail, finish } from "../state/requests.ts";
import type { State, Worker } from "../state/state.ts";
import type { Event } from "./event.ts";

type E = Extract<Event, { kind: "clientDisconnected" | "clientStalled" }>;

export function onClientGone(state: State, e: E, out: Effect[]): void {
  const request = state.requests.get(e.requestId);
  if (request === undefined) return;
  const stalled = e.kind === "clientStalled";
  let worker: Worker | undefined;
  if (request.status.kind !== "queued") {
    worker = state.workers.get(request.status.workerId);
    if (worker !== undefined) {
      const reason = stalled
        ? { other: "client_too_slow" }
        : "client_disconnect" as const;
      cancelOnWorker(state, worker, request, reason, out);
    }
  }
  out.push({
    kind: "log",
    level: "info",
    message: stalled
      ? "client too slow, request cancelled"
      : "client disconnected, request cancelled",
    fields: { request_id: request.id, state: request.status.kind },
  });
  if (stalled) {
    const error = apiError("client_too_slow");
    fail(state, request, error, "cancelled", out);
  } else {
    finish(state, request, "cancelled", 499, out);
  }
  releaseAfterCut(state, worker, out);
}
