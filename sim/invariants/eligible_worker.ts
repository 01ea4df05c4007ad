// eligibleWorker (C6/C7/C28/C42): a worker is acked only models it advertised,
// and a request is dispatched only to a registered, non-draining worker that
// acked its model, a wildcard one only when no exact match is free.
import type { MWorker } from "../model/model.ts";
import type { Check } from "./catalog.ts";
import type { Dispatch } from "./dispatch.ts";

export function ackToKnownWorker(check: Check, conn: string): void {
  check(
    false,
    "eligibleWorker",
    () => `register_ack to unknown worker ${conn}`,
  );
}

export function ackedOnlyAdvertised(
  check: Check,
  w: MWorker,
  acked: string[],
  advertised: string[],
): void {
  check(
    acked.every((x) => advertised.includes(x)),
    "eligibleWorker",
    () => `${w.conn} acked ${acked} beyond advertised ${advertised}`,
  );
}

export function dispatchedToRegistered(
  check: Check,
  id: string,
  conn: string,
  w: MWorker | undefined,
): void {
  check(
    w?.registered === true,
    "eligibleWorker",
    () => `${id} dispatched to unregistered ${conn}`,
  );
}

export function dispatchedToNotDraining(
  { check, id, conn, w }: Dispatch,
): void {
  check(
    !w.draining,
    "eligibleWorker",
    () => `${id} dispatched to draining ${conn}`,
  );
}

export function dispatchedToHolder(
  { check, id, conn, r, w }: Dispatch,
  exact: boolean,
): void {
  check(
    exact || w.wildcard,
    "eligibleWorker",
    () =>
      `${id} for "${r.model}" dispatched to ${conn} which acked ${[
        ...w.acked,
      ]}`,
  );
}

/** `x` is free and could serve: then the chosen worker must not be a wildcard while `x` is exact. */
export function exactBeforeWildcard(
  { check, id, conn, r }: Dispatch,
  exact: boolean,
  x: MWorker,
  xExact: boolean,
): void {
  check(
    exact || !xExact,
    "eligibleWorker",
    () =>
      `${id} for "${r.model}" went to wildcard ${conn} while ${x.conn} serves it exactly and is free`,
  );
}
