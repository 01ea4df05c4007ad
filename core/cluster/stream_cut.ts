// A `cut` record applied (issue 23): an answer the data path ended outside the
// log (its size limit, the C48 idle limit kept by the client's instance, a
// broken link between instances) ends in every replica at one log position,
// as the single server's core would have ended it: a cancel to the worker,
// the client's error, the slot freed and the queue moved.
import { answerLimit } from "../config.ts";
import { answerTooLarge, apiError } from "../protocol/errors.ts";
import type { Effect } from "../effect.ts";
import { cutAnswer } from "../state/cut_answer.ts";
import { assignedRequest } from "../state/requests.ts";
import type { Request, State } from "../state/state.ts";
import type { ClientError, RequestId, WorkerId } from "../vocabulary.ts";
import { LINK_LOST } from "./data_path.ts";
import type { CutReason } from "./record.ts";

function errorFor(
  state: State,
  request: Request,
  reason: CutReason,
): ClientError {
  switch (reason) {
    case "too_large": {
      const streaming = request.isStreaming;
      return answerTooLarge(streaming, answerLimit(state.config, streaming));
    }
    case "idle":
      return apiError("request_timeout", {
        idleSecs: Math.round(state.config.requestTimeoutMs / 1000),
      });
    case "link_lost":
      return LINK_LOST;
  }
}

/** Ends `requestId` if it is still `workerId`'s; a cut that lost the race to an end does nothing. */
export function applyCut(
  state: State,
  requestId: RequestId,
  workerId: WorkerId,
  reason: CutReason,
  out: Effect[],
): void {
  const request = assignedRequest(state, workerId, requestId);
  if (request === undefined) return;
  const error = errorFor(state, request, reason);
  const cancel = reason === "idle" ? "timeout" : { other: error.code };
  const why: Effect = {
    kind: "log",
    level: "warn",
    message: `answer cut: ${error.code.replaceAll("_", " ")}`,
    fields: { request_id: requestId, worker_id: workerId, reason },
  };
  cutAnswer(state, request, workerId, cancel, error, why, out);
}

/**
 * Streams are watched for idleness by the instance holding their client (C48),
 * not by the replica, which sees only their first byte: on every tick the
 * replicas' own idle clock is held at now, so the core's check never fires on
 * a stream whose bytes it does not see.
 */
export function idleKeptByClients(state: State, atMs: number): void {
  for (const r of state.requests.values()) {
    if (r.status.kind === "streaming") r.status.lastChunkAtMs = atMs;
  }
}
