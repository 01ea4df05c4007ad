// noStarvation (spec 004): while low stays dispatchable, at most the sum over
// higher classes of (floor(w/w_low)+1) dispatches pass before a low one.
import { CLASSES } from "../model/model.ts";
import type { Scheduled } from "./scheduled.ts";

/** Counts how long low has waited while it stays dispatchable. */
export function lowServedInTime(
  { m, check, r, classReady }: Scheduled,
): void {
  const wts = m.c.priorityWeights;
  const c = r.priority;
  if (c === "low" || !classReady.has("low")) {
    m.lowRun = 0;
    return;
  }
  m.lowRun++;
  if (m.lowRun > m.sched.maxLowWait) m.sched.maxLowWait = m.lowRun;
  let bound = 0;
  for (const h of CLASSES) {
    if (h !== "low") bound += Math.floor(wts[h] / wts.low) + 1;
  }
  check(
    m.lowRun <= bound,
    "noStarvation",
    () =>
      `${m.lowRun} dispatches of higher classes in a row (now ${r.id}, ${c}) while a low request stayed dispatchable (bound ${bound} for weights ${wts.high}/${wts.normal}/${wts.low})`,
  );
}
