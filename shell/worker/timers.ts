// The worker's named timers (TimerName), armed by the core: each armed for a deadline,
// firing once. Re-arming a timer that fires no later than the new deadline only
// moves the deadline; the timer re-arms itself for the rest when it fires early.
// The idle watchdog is re-armed on every frame, and a clearTimeout + setTimeout
// per frame was ~7 µs a request in the worker's (d) profile (issue 10).
import type { TimerName } from "../../core/worker/mod.ts";

type Timer = ReturnType<typeof setTimeout>;

export type WorkerTimers = {
  arm(timer: TimerName, ms: number): void;
  clearAll(): void;
};

export function makeWorkerTimers(
  fired: (timer: TimerName) => void,
): WorkerTimers {
  const timers = new Map<TimerName, Timer>();
  /** When each armed timer is due (performance.now() ms). */
  const deadlines = new Map<TimerName, number>();
  const firesAt = new Map<TimerName, number>();

  function fire(timer: TimerName): void {
    const due = deadlines.get(timer);
    if (due === undefined) return;
    const now = performance.now();
    if (due > now) {
      schedule(timer, due - now, due);
      return;
    }
    timers.delete(timer);
    deadlines.delete(timer);
    firesAt.delete(timer);
    fired(timer);
  }

  function schedule(timer: TimerName, ms: number, due: number): void {
    clearTimeout(timers.get(timer));
    firesAt.set(timer, due);
    timers.set(timer, setTimeout(() => fire(timer), ms));
  }

  return {
    arm(timer, ms) {
      const due = performance.now() + ms;
      deadlines.set(timer, due);
      const at = firesAt.get(timer);
      if (timers.has(timer) && at !== undefined && at <= due) return;
      schedule(timer, ms, due);
    },
    clearAll() {
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
    },
  };
}
