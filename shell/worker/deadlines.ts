// Deadlines that many backend calls share one timer for: the response head's
// BACKEND_HEAD_TIMEOUT_SECS (C63), one per request. A setTimeout and a
// clearTimeout per request were ~2 µs of the worker's CPU per plain request
// (issue 31, profile of (j)); here a request adds an entry to an
// insertion-ordered set and deletes it when its head arrives.
//
// - One timer, armed for the earliest deadline it knows. When it fires, every
//   entry due is fired (in the order added), and the timer is armed again for
//   the earliest one left, if any. A deadline never fires early.
// - Entries are deleted when cancelled, so the set holds only calls in
//   flight. The timer is not cleared when the set empties: it fires once,
//   finds nothing, and stays unarmed until the next entry. With one duration
//   for every request (the worker's setting) later entries are never due
//   earlier, so a busy worker's timer fires about once per duration.
// - The timer is unref'd: a deadline keeps no process alive (each call in
//   flight holds its own socket, which does).
import { clearTimeout, setTimeout } from "node:timers";

/** One deadline: when it is due (performance.now() ms) and what it fires. */
export type Deadline = { due: number; fire: () => void };

export type Deadlines = {
  /** Calls `fire` once `ms` have passed, unless cancelled before. */
  add(ms: number, fire: () => void): Deadline;
  /** Forgets `d`; nothing happens if it has fired or was cancelled already. */
  cancel(d: Deadline): void;
  /** How many deadlines are pending (tests). */
  size(): number;
};

export function makeDeadlines(): Deadlines {
  const pending = new Set<Deadline>();
  let timer: ReturnType<typeof setTimeout> | null = null;
  /** When the armed timer fires (performance.now() ms). */
  let armedFor = Infinity;

  const arm = (due: number, now: number) => {
    if (timer !== null) clearTimeout(timer);
    armedFor = due;
    timer = setTimeout(fireDue, Math.max(0, Math.ceil(due - now)));
    timer.unref();
  };

  const fireDue = () => {
    timer = null;
    armedFor = Infinity;
    const now = performance.now();
    let next = Infinity;
    for (const d of pending) {
      if (d.due <= now) {
        pending.delete(d);
        d.fire();
      } else if (d.due < next) next = d.due;
    }
    // A fired call may have added deadlines (and armed the timer) meanwhile.
    if (next < armedFor) arm(next, now);
  };

  return {
    add(ms, fire) {
      const now = performance.now();
      const d: Deadline = { due: now + ms, fire };
      pending.add(d);
      if (d.due < armedFor) arm(d.due, now);
      return d;
    },
    cancel(d) {
      pending.delete(d);
    },
    size: () => pending.size,
  };
}
