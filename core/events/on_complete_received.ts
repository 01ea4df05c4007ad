// response_complete (C14, C15, C44): ends the request with the worker's status,
// headers and body untouched, or acknowledges a cancel; either way the slot frees
// and the queue moves (C10).
//
// Issue 14: a non-2xx completion after a stream started is a failure, not data:
// the stream ends with an SSE error event, never with the error body spliced in
// as a chunk and never as a normal end (the client would take a half answer for a
// whole one). A non-streaming answer assembled from chunks (body-chunks-v1) is
// bounded by `responseBodyCharsMax`.
import type { ClientError } from "../vocabulary.ts";
import {
  answerTooLarge,
  apiError,
  notFinalStatus,
} from "../protocol/errors.ts";
import type { Effect } from "../effect.ts";
import { answerBytesMax, answerLimit } from "../config.ts";
import { recordBackendSuccess } from "../state/backend_circuit.ts";
import { cacheReportOf } from "../state/cache_report.ts";
import { closeIfDrained } from "../state/drop_worker.ts";
import { noteServed } from "../state/residency.ts";
import { fail, finish, pumpQueue } from "../state/requests.ts";
import { handOverBodyPieces } from "../state/body_budget.ts";
import type { State } from "../state/state.ts";
import { countDeltas } from "../state/usage.ts";
import { streamOpened } from "../state/wait_lines.ts";
import { releaseSlot } from "../state/workers.ts";
import { requestOfFrame } from "./drop_frame.ts";
import type { Event } from "./event.ts";

type E = Extract<Event, { kind: "completeReceived" }>;

/** A status a whole answer may carry: HTTP's final ones. */
export function isFinalStatus(status: number): boolean {
  return Number.isInteger(status) && status >= 200 && status <= 599;
}

export function onCompleteReceived(state: State, e: E, out: Effect[]): void {
  const worker = state.workers.get(e.workerId);
  if (worker === undefined) return;
  if (worker.cancelling.has(e.requestId)) {
    releaseSlot(state, worker, e.requestId);
  } else {
    const request = requestOfFrame(state, e, "response_complete", out);
    if (request === undefined) return;
    recordBackendSuccess(state, worker);
    // Issue 30: an answer says the backend holds its model (the pump below moves the queue).
    if (e.statusCode < 400) noteServed(state, worker, request.model, out);
    const cacheReport = cacheReportOf(e.headers);
    // Either way the request ends with what the backend reported of its cache
    // and tokens.
    const failWith = (error: ClientError) =>
      fail(state, request, error, "failed", out, cacheReport, e.tokenCounts);
    const complete = () =>
      finish(
        state,
        request,
        "completed",
        e.statusCode,
        out,
        cacheReport,
        e.tokenCounts,
      );
    // Issue 30: a stream opened by wait lines ends as a started one.
    if (request.status.kind === "streaming" || streamOpened(request)) {
      if (e.statusCode >= 400) {
        failWith(apiError("upstream_error", { status: e.statusCode }));
      } else {
        if (e.body.length > 0) {
          out.push({
            kind: "writeChunk",
            requestId: request.id,
            chunk: e.body,
          });
        }
        if (request.deltas !== null && e.body.length > 0) {
          request.deltas += countDeltas(e.body, request.endpointPath);
        }
        out.push({ kind: "endStream", requestId: request.id, error: null });
        complete();
      }
    } else if (!isFinalStatus(e.statusCode)) {
      // Issue 33.11: a status HTTP has no final meaning for (600, a 1xx) is
      // not an answer: the client gets the relay's 502, never the backend's
      // body under a status it did not send.
      failWith(notFinalStatus(e.statusCode));
    } else if (
      request.bodyBytes + e.body.length > answerBytesMax(state.config)
    ) {
      // The worker is done with it: nothing to cancel, and never requeued (its
      // own answer's size would fail it again on any worker). The completion's
      // own frame (at most the frame limit) is already here: the budget is
      // not asked.
      failWith(answerTooLarge(false, answerLimit(state.config, false)));
    } else {
      out.push({
        kind: "respond",
        requestId: request.id,
        status: e.statusCode,
        headers: e.headers,
        ...(request.bodyPieces.length > 0
          ? { bodyPieces: request.bodyPieces }
          : {}),
        body: e.body,
        queueWaitMs: request.queueWaitMs,
        ...(e.bodyBase64 === undefined ? {} : { bodyBase64: e.bodyBase64 }),
      });
      handOverBodyPieces(state, request);
      complete();
    }
    releaseSlot(state, worker, e.requestId);
    out.push({
      kind: "log",
      level: "debug",
      message: "response complete",
      fields: {
        request_id: e.requestId,
        worker_id: worker.id,
        status: e.statusCode,
      },
    });
  }
  closeIfDrained(state, worker, out);
  pumpQueue(state, worker.provider, out);
}
