// requeueCap (C22/C23): a request is requeued at most requeueCountMax (3) times,
// and requeueing never extends its deadline.
import type { State } from "../../core/mod.ts";
import type { Model, MReq } from "../model/model.ts";
import type { Check } from "./catalog.ts";

export function finishedWithinCap(
  m: Model,
  check: Check,
  id: string,
  requeues: number,
): void {
  check(
    requeues <= m.c.requeueCountMax,
    "requeueCap",
    () => `${id} finished after ${requeues} requeues`,
  );
}

export function dispatchedWithinCap(
  m: Model,
  check: Check,
  id: string,
  r: MReq,
): void {
  check(
    r.requeues <= m.c.requeueCountMax,
    "requeueCap",
    () => `${id} dispatched after ${r.requeues} requeues`,
  );
}

export function waitsWithinCap(m: Model, check: Check, r: MReq): void {
  check(
    r.requeues <= m.c.requeueCountMax,
    "requeueCap",
    () => `${r.id} waits after ${r.requeues} requeues`,
  );
}

/** At a tick: the core's deadline is still arrival + request timeout, the queue's no later. */
export function deadlineNotMoved(
  m: Model,
  check: Check,
  r: MReq,
  state: State,
): void {
  const core = state.requests.get(r.id);
  if (core === undefined) return;
  check(
    core.deadlineAtMs === r.arrivedAtMs + m.c.requestTimeoutMs &&
      (core.status.kind !== "queued" ||
        core.status.queueDeadlineAtMs <= core.deadlineAtMs),
    "requeueCap",
    () => `${r.id} deadline moved to ${core.deadlineAtMs}`,
  );
}
