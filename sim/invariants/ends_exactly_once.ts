// endsExactlyOnce (C34): every accepted request ends exactly once, with exactly
// one client answer and one requestFinished in the same step.
import type { Effect, Event } from "../../core/mod.ts";
import type { Ended, Model, MReq } from "../model/model.ts";
import type { Check } from "./catalog.ts";

type RequestReceived = Extract<Event, { kind: "requestReceived" }>;
type RequestFinished = Extract<Effect, { kind: "requestFinished" }>;

/** A request id is never reused (else two requests could share one ending). */
export function requestIdFresh(
  m: Model,
  check: Check,
  e: RequestReceived,
): void {
  check(
    !m.reqs.has(e.requestId) && !m.ended.has(e.requestId),
    "endsExactlyOnce",
    () => `request id "${e.requestId}" reused`,
  );
}

/** A request refused on arrival ends once. */
export function refusedOnce(m: Model, check: Check, nr: MReq): void {
  check(
    !m.ended.has(nr.id),
    "endsExactlyOnce",
    () => `${nr.id} ended twice`,
  );
}

/** Once a stream started, only endStream may end it. */
export function noErrorAfterStreamStart(check: Check, r: MReq): void {
  check(
    r.status !== "streaming",
    "endsExactlyOnce",
    () => `respondError for ${r.id} whose stream already started`,
  );
}

export function endStreamOnlyWhileStreaming(check: Check, r: MReq): void {
  check(
    r.status === "streaming",
    "endsExactlyOnce",
    () => `endStream for ${r.id} in status ${r.status}`,
  );
}

/** requestFinished follows exactly one client answer in the same step. */
export function finishedAfterOneAnswer(
  m: Model,
  check: Check,
  f: RequestFinished,
): void {
  check(
    m.endedNow.has(f.requestId) && !m.finishedNow.has(f.requestId),
    "endsExactlyOnce",
    () =>
      `requestFinished for ${f.requestId} without exactly one client answer in the step`,
  );
}

/** Only a request refused on arrival ends as `rejected`. */
export function rejectedOnlyOnArrival(
  m: Model,
  check: Check,
  f: RequestFinished,
): void {
  check(
    f.outcome !== "rejected" || m.newReq?.id === f.requestId,
    "endsExactlyOnce",
    () => `${f.requestId} rejected after it was accepted`,
  );
}

/** Only a waiting request is dispatched (never one already running or ended). */
export function dispatchedOnlyWhenQueued(
  check: Check,
  id: string,
  r: MReq | undefined,
): void {
  check(
    r !== undefined && r.status === "queued",
    "endsExactlyOnce",
    () =>
      `request ${id} dispatched while ${
        r === undefined ? "not open" : r.status
      }`,
  );
}

/** After the step: every client answer came with its requestFinished. */
export function answeredAndFinished(
  m: Model,
  check: Check,
  id: string,
  ended: Ended,
): void {
  check(
    m.finishedNow.has(id),
    "endsExactlyOnce",
    () => `${id} answered (${ended.how}) without requestFinished`,
  );
}
