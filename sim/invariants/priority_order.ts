// priorityOrder (spec 004): while a higher class stays dispatchable, a lower
// class gets at most ceil(w_lower/w_higher) dispatches between two of its
// dispatches (stride weights).
import type { Priority } from "../../core/mod.ts";
import { CLASSES } from "../model/model.ts";
import type { Scheduled } from "./scheduled.ts";

const RANK: Record<Priority, number> = { high: 0, normal: 1, low: 2 };

/** Counts the run of r's class since each dispatchable higher class was last served. */
export function lowerRunsBounded(
  { m, check, r, classReady }: Scheduled,
): void {
  const wts = m.c.priorityWeights;
  const c = r.priority;
  for (const h of CLASSES) {
    if (h === c || !classReady.has(h)) {
      m.lowerRuns.delete(h); // served, or not (certainly) waiting: a new window
      continue;
    }
    if (RANK[h] > RANK[c]) continue;
    let runs = m.lowerRuns.get(h);
    if (runs === undefined) {
      runs = new Map();
      m.lowerRuns.set(h, runs);
    }
    const n = (runs.get(c) ?? 0) + 1;
    runs.set(c, n);
    const bound = Math.ceil(wts[c] / wts[h]);
    check(
      n <= bound,
      "priorityOrder",
      () =>
        `${r.id} (${c}, tenant ${r.tenant}) is the ${n}th ${c} dispatch since the last ${h} one while ${h} requests stayed dispatchable (weights ${h} ${
          wts[h]
        }, ${c} ${wts[c]}: at most ${bound})`,
    );
  }
}
