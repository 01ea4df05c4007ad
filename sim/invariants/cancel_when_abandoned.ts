// cancelWhenAbandoned (C18/C19): a cancel goes to a worker exactly when a
// dispatched request is abandoned: never for a request it does not hold, and
// never missing when a request on a live worker ends other than by that worker.
import type { Event } from "../../core/mod.ts";
import {
  type Ended,
  type Model,
  type MReq,
  type MWorker,
  oversizedComplete,
} from "../model/model.ts";
import type { Check } from "./catalog.ts";

/** A cancel names an open request assigned to that very worker. */
export function cancelToItsWorker(
  check: Check,
  conn: string,
  id: string,
  r: MReq | undefined,
  w: MWorker | undefined,
): void {
  check(
    r !== undefined && w !== undefined && r.conn === w.conn,
    "cancelWhenAbandoned",
    () =>
      `cancel to ${conn} for ${id} (${
        r === undefined ? "not open" : `status ${r.status} on ${r.conn}`
      })`,
  );
}

/** A request that ended on a live worker was cancelled, or ended by that worker's own answer. */
export function endedWithCancel(
  m: Model,
  check: Check,
  e: Event,
  id: string,
  ended: Ended,
  conn: string,
): void {
  const alive = m.workers.has(conn);
  const byItsWorker =
    ((e.kind === "completeReceived" || e.kind === "workerErrorReceived") &&
      e.workerId === conn && e.requestId === id) ||
    oversizedComplete(e, conn, id);
  check(
    ended.cancelled || !alive || byItsWorker,
    "cancelWhenAbandoned",
    () =>
      `${id} on ${conn} ended (${ended.how} ${ended.code}) without a cancel to its worker`,
  );
}

/** A cancel is sent only for a request that ended in the same step. */
export function cancelOnlyWhenAbandoned(
  m: Model,
  check: Check,
  id: string,
): void {
  check(
    m.endedNow.has(id),
    "cancelWhenAbandoned",
    () => `cancel sent for ${id} which was not abandoned in this step`,
  );
}
