// queueBound (C9, spec 004): a new request is queued only below MAX_QUEUE_LEN
// and its tenant's TENANT_MAX_QUEUE_LEN, and refused as queue_full only at them,
// or (issue 33) at the share a model no registered worker holds may have while
// other workers are registered.
import { WORKERLESS_QUEUE_SHARE } from "../../core/state/queue.ts";
import type { Model, MReq } from "../model/model.ts";
import type { Check } from "./catalog.ts";

/** Issue 33: a model that workers are registered without may hold this many. */
function workerlessMax(m: Model): number {
  return Math.max(1, Math.floor(m.c.queueLenMax * WORKERLESS_QUEUE_SHARE));
}

/** Registered workers exist, none holding the model; and how many of it wait. */
function workerless(m: Model, nr: MReq): { is: boolean; queued: number } {
  const workers = [...m.workers.values()];
  const is = workers.some((w) => w.registered) &&
    !workers.some((w) => w.acked.has(nr.model) || w.wildcard);
  let queued = 0;
  for (const q of m.reqs.values()) {
    if (q.status === "queued" && q.model === nr.model && q.id !== nr.id) {
      queued++;
    }
  }
  return { is, queued };
}

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
  const model = workerless(m, nr);
  check(
    !model.is || model.queued < workerlessMax(m),
    "queueBound",
    () =>
      `${nr.id} queued for "${nr.model}", which no registered worker holds, with ${model.queued} of it already waiting (max ${
        workerlessMax(m)
      })`,
  );
}

export function fullOnlyAtBound(
  m: Model,
  check: Check,
  nr: MReq,
  tenantQueued: number,
): void {
  const model = workerless(m, nr);
  check(
    m.queuedBefore >= m.c.queueLenMax ||
      tenantQueued >= m.c.tenantQueueLenMax ||
      model.queued >= workerlessMax(m),
    "queueBound",
    () =>
      `${nr.id} refused as queue_full with only ${m.queuedBefore} waiting, ${tenantQueued} of tenant ${nr.tenant}`,
  );
}
