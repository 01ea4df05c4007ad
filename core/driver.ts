// The one driver loop both shells and the simulator's virtual worker use (issue
// 17; in core since issue 27, so sim/ uses it without a copy: it is pure, no
// I/O, clock or timers, only a queue). Take the next event, let the
// core decide (`step`), carry out what it decided (`run`), in order. Events
// submitted while actions run (a socket closing under a write, a timer armed at
// zero) are queued and stepped after the current batch, never re-entrantly, so
// the core always sees one event at a time in arrival order (conventions §5, P2).
//
// Its users differ only in what a failure means and whether the loop can end:
// - the server logs a core or effect failure and keeps serving everyone else
//   (`onStepError`, `onActionError`);
// - the worker lets a failure propagate (no handlers: a bug there is fatal) and
//   stops taking events once it exits (`stop`);
// - the simulator's virtual worker (sim/virtual_worker.ts) runs one driver per
//   worker process, as the worker does, and stops it when the process dies.

export type DriverOptions<S, E, A> = {
  /** Passed to every `step`; the core mutates it in place. */
  state: S;
  /** The core: what to do about one event. */
  step: (state: S, event: E) => readonly A[];
  /** Carries out one action; may `submit` more events (they are queued). */
  run: (action: A) => void;
  /**
   * A throw from `step`: the event is skipped and the loop goes on. Absent, the
   * throw propagates to the caller of `submit`; events still queued wait for
   * the next `submit`.
   */
  onStepError?: (error: unknown, event: E) => void;
  /** A throw from `run`: the next action runs. Absent, as for `onStepError`. */
  onActionError?: (error: unknown, action: A) => void;
};

export type Driver<E> = {
  submit(event: E): void;
  /**
   * Ends the loop for good: the actions of the event being handled still run,
   * later events (queued or submitted) are dropped.
   */
  stop(): void;
  readonly stopped: boolean;
};

export function makeDriver<S, E, A>(
  options: DriverOptions<S, E, A>,
): Driver<E> {
  const { state, step, run, onStepError, onActionError } = options;
  const queue: E[] = [];
  let running = false;
  let stopped = false;

  function actionsFor(event: E): readonly A[] {
    if (onStepError === undefined) return step(state, event);
    try {
      return step(state, event);
    } catch (e) {
      onStepError(e, event);
      return [];
    }
  }

  function runAll(actions: readonly A[]): void {
    for (const action of actions) {
      if (onActionError === undefined) {
        run(action);
        continue;
      }
      try {
        run(action);
      } catch (e) {
        onActionError(e, action);
      }
    }
  }

  function submit(event: E): void {
    if (stopped) return;
    queue.push(event);
    if (running) return;
    running = true;
    try {
      for (
        let next = queue.shift();
        next !== undefined && !stopped;
        next = queue.shift()
      ) {
        runAll(actionsFor(next));
      }
    } finally {
      running = false;
    }
  }

  return {
    submit,
    stop() {
      stopped = true;
    },
    get stopped() {
      return stopped;
    },
  };
}
