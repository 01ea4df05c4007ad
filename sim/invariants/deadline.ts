// deadline (C12/C19/C48): a request ends no later than its deadline plus one
// tick. Ticks come every tickMs, so past a deadline the first tick must end it.
import type { Model, MReq } from "../model/model.ts";
import type { Check } from "./catalog.ts";

export function openBeforeDeadline(
  m: Model,
  check: Check,
  r: MReq,
  now: number,
): void {
  const d = m.deadline(r);
  check(
    d > now,
    "deadline",
    () =>
      `${r.id} (${r.status}, arrived ${r.arrivedAtMs}, ${r.requeues} requeues) still open at tick ${now}, deadline ${d} (tick ${m.tickMs} ms)`,
  );
}
