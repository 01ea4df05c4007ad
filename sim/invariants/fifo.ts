// fifo (C9/C10): FIFO within (priority, tenant) among requests a free worker
// can serve. On arrival nothing the chosen worker could serve may wait; from
// the queue, no older request of the same (priority, tenant) it serves.
import type { Dispatch } from "./dispatch.ts";

export function noOlderWaiting(
  { m, check, id, conn, r, w }: Dispatch,
  isNew: boolean,
): void {
  if (m.queued <= (isNew ? 0 : 1)) return;
  for (const q of m.reqs.values()) {
    if (q.status !== "queued" || q === r || q.order > r.order) continue;
    if (!isNew && (q.tenant !== r.tenant || q.priority !== r.priority)) {
      continue;
    }
    if (!m.mayGo(q, w)) continue;
    check(
      !(w.acked.has(q.model) || w.wildcard),
      "fifo",
      () =>
        `${id} (order ${r.order}, ${r.priority}/${r.tenant}) went to ${conn} while older ${q.id} (order ${q.order}, "${q.model}", ${q.priority}/${q.tenant}) waits`,
    );
  }
}
