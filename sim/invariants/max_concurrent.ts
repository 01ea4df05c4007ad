// maxConcurrent (C8): no worker has more in flight than its max_concurrent,
// counting requests it still finishes after a cancel (within the grace).
import type { Dispatch } from "./dispatch.ts";

/** A dispatch finds a free slot (a grace ending at this tick may have freed one). */
export function slotFree({ m, check, id, conn, w }: Dispatch): void {
  let reservedLo = w.assigned.size;
  for (const g of w.cancelling.values()) {
    if (m.now < g || m.event?.kind !== "tick") reservedLo++;
  }
  check(
    reservedLo < w.max,
    "maxConcurrent",
    () =>
      `${id} dispatched to ${conn} holding ${reservedLo} of max_concurrent ${w.max}`,
  );
}
