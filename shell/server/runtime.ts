// The one driver: take the next event, reduce it, run its effects in order.
// Events raised while effects run (a slow client, a closed socket) are queued and
// reduced after the current batch, never re-entrantly (conventions §5, P2).
import { type Effect, type Event, reduce, type State } from "../../core/mod.ts";
import type { Logger } from "../log.ts";

export type Runtime = {
  readonly state: State;
  submit(event: Event): void;
};

export function makeRuntime(
  state: State,
  runEffect: (effect: Effect) => void,
  log: Logger,
): Runtime {
  const pending: Event[] = [];
  let running = false;
  function submit(event: Event): void {
    pending.push(event);
    if (running) return;
    running = true;
    try {
      for (
        let next = pending.shift();
        next !== undefined;
        next = pending.shift()
      ) {
        let effects: Effect[];
        try {
          effects = reduce(state, next).effects;
        } catch (e) {
          // A broken invariant is our bug: report it loudly, keep serving others.
          log("error", "core rejected an event", {
            event: next.kind,
            error: String(e),
          });
          continue;
        }
        for (const effect of effects) {
          try {
            runEffect(effect);
          } catch (e) {
            log("error", "effect failed", {
              effect: effect.kind,
              error: String(e),
            });
          }
        }
      }
    } finally {
      running = false;
    }
  }
  return { state, submit };
}
