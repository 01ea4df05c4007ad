// stream-head-v1 (issue 25): a streamed answer's head, sent by the worker
// before its first chunk. It is kept on the dispatch, not sent: the first chunk
// is still the commit point (a request may be requeued until then, and the
// next worker's head replaces this one with the dispatch). The first chunk's
// `startStream` carries it, so the client's head is the backend's instead of
// the relay's fixed SSE head. Per stream, never per chunk.
import { notFinalStatus } from "../protocol/errors.ts";
import type { Effect } from "../effect.ts";
import { EXTENSION_STREAM_HEAD } from "../protocol/messages.ts";
import type { Request, State, Worker } from "../state/state.ts";
import { cutAnswer } from "../state/cut_answer.ts";
import { isFinalStatus } from "./on_complete_received.ts";
import { requestOfFrame } from "./drop_frame.ts";
import type { Event } from "./event.ts";
import { protocolViolation } from "./on_worker_frame_invalid.ts";

type E = Extract<Event, { kind: "headReceived" }>;

export function onHeadReceived(state: State, e: E, out: Effect[]): void {
  // An extension frame from a worker that did not negotiate it is the
  // protocol error any unknown frame is (C41).
  const worker = state.workers.get(e.workerId);
  if (worker?.extensions.includes(EXTENSION_STREAM_HEAD) !== true) {
    return protocolViolation(
      state,
      e.workerId,
      "response_head is not part of the protocol without stream-head-v1",
      out,
    );
  }
  const request = requestOfFrame(state, e, "response_head", out);
  if (request === undefined) return;
  // Only a stream not started yet takes a head: a non-streaming answer's
  // headers come with its completion, and a started stream's head is sent.
  if (!request.isStreaming || request.status.kind !== "dispatched") {
    out.push({
      kind: "log",
      level: "debug",
      message: "response_head ignored: no stream waiting for its head",
      fields: { worker_id: e.workerId, request_id: e.requestId },
    });
    return;
  }
  if (!isFinalStatus(e.statusCode)) {
    // Issue 33.11: as for a whole answer (on_complete_received.ts), a status
    // HTTP has no final meaning for is not passed on with the backend's bytes.
    return refuseHead(state, request, worker, e.statusCode, out);
  }
  request.status.head = { status: e.statusCode, headers: e.headers };
}

function refuseHead(
  state: State,
  request: Request,
  worker: Worker,
  status: number,
  out: Effect[],
): void {
  const cancel = { other: "backend_protocol_error" };
  const error = notFinalStatus(status);
  cutAnswer(state, request, worker.id, cancel, error, null, out);
}
