// dispatchOnlyToAccepting (issue 25): a request goes only to a worker whose
// endpoint_prefixes match its path (none listed: every path) and, when its
// body is not text, that negotiated body-bytes-v1; and it is refused as having
// no worker (404 for the path, 501 for the body) only when no registered worker
// of its model could take it.
import type { Model, MReq } from "../model/model.ts";
import type { Check } from "./catalog.ts";
import type { Dispatch } from "./dispatch.ts";

export function dispatchedToAccepting(
  { m, check, id, conn, r, w }: Dispatch,
): void {
  check(
    m.accepts(w, r),
    "dispatchOnlyToAccepting",
    () =>
      `${id} (${r.path}${
        r.binary ? ", binary body" : ""
      }) dispatched to ${conn} with prefixes [${w.prefixes}] and extensions [${[
        ...w.ext,
      ]}]`,
  );
}

/** A new request refused for want of a worker: none registered for its model may take it. */
export function refusedOnlyWithoutTaker(
  m: Model,
  check: Check,
  nr: MReq,
  code: string,
): void {
  const taker = [...m.workers.values()].find((x) =>
    x.registered && (x.acked.has(nr.model) || x.wildcard) && m.accepts(x, nr)
  );
  check(
    taker === undefined,
    "dispatchOnlyToAccepting",
    () =>
      `${nr.id} (${nr.path}) refused ${code} while ${taker?.conn} takes "${nr.model}" on that path`,
  );
}
