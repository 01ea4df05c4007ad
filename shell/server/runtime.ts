// The server's runtime: the one driver (core/driver.ts) around `reduce`, running
// each effect. A core or effect failure is our bug: it is logged loudly and the
// server keeps serving everyone else.
import { type Effect, type Event, reduce, type State } from "../../core/mod.ts";
import { makeDriver } from "../../core/driver.ts";
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
  const driver = makeDriver<State, Event, Effect>({
    state,
    step: (s, event) => reduce(s, event).effects,
    run: runEffect,
    onStepError: (e, event) =>
      log("error", "core rejected an event", {
        event: event.kind,
        error: String(e),
      }),
    onActionError: (e, effect) =>
      log("error", "effect failed", { effect: effect.kind, error: String(e) }),
  });
  return { state, submit: driver.submit };
}
