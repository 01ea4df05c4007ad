// queueBound (C9, spec 004): a new request is queued only below MAX_QUEUE_LEN
// and its tenant's TENANT_MAX_QUEUE_LEN, and refused as queue_full only at them.
import type { Model, MReq } from "../model/model.ts";
import type { Check } from "./catalog.ts";

export function queuedBelowBound(
  m: Model,
  check: Check,
  nr: MReq,
  tenantQueued: number,
): void {
  check(
    m.queuedBefore < m.c.queueLenMax &&
      tenantQueued < m.c.tenantQueueLenMax,
    "queueBound",
    () =>
      `${nr.id} queued with ${m.queuedBefore} already waiting (max ${m.c.queueLenMax}), ${tenantQueued} of tenant ${nr.tenant} (max ${m.c.tenantQueueLenMax})`,
  );
}

export function fullOnlyAtBound(
  m: Model,
  check: Check,
  nr: MReq,
  tenantQueued: number,
): void {
  check(
    m.queuedBefore >= m.c.queueLenMax ||
      tenantQueued >= m.c.tenantQueueLenMax,
    "queueBound",
    () =>
      `${nr.id} refused as queue_full with only ${m.queuedBefore} waiting, ${tenantQueued} of tenant ${nr.tenant}`,
  );
}
