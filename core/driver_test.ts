import assert from "node:assert/strict";
import { makeDriver } from "./driver.ts";

type Event = { n: number; raise?: number[] };
type Action = { kind: "note"; n: number } | { kind: "raise"; n: number };

/** A driver whose core notes each event and asks for the events it names to be raised. */
function recording(
  options: { failStep?: number; failAction?: number; handle?: boolean } = {},
) {
  const seen: number[] = [];
  const errors: string[] = [];
  const driver = makeDriver<number[], Event, Action>({
    state: seen,
    step: (state, event) => {
      if (event.n === options.failStep) throw new Error(`step ${event.n}`);
      state.push(event.n);
      return [
        { kind: "note", n: event.n },
        ...(event.raise ?? []).map((n) => ({ kind: "raise" as const, n })),
      ];
    },
    run: (action) => {
      if (action.kind === "note" && action.n === options.failAction) {
        throw new Error(`action ${action.n}`);
      }
      if (action.kind === "raise") driver.submit({ n: action.n });
    },
    ...(options.handle
      ? {
        onStepError: (e: unknown, event: Event) =>
          errors.push(`${e} at event ${event.n}`),
        onActionError: (e: unknown, action: Action) =>
          errors.push(`${e} at ${action.kind}`),
      }
      : {}),
  });
  return { driver, seen, errors };
}

Deno.test("events raised while actions run are stepped after the current batch, in order", () => {
  const { driver, seen } = recording();
  driver.submit({ n: 1, raise: [2, 3] });
  driver.submit({ n: 4 });
  assert.deepEqual(seen, [1, 2, 3, 4]);
});

Deno.test("with handlers, a failing step or action is reported and the loop goes on", () => {
  const { driver, seen, errors } = recording({
    failStep: 2,
    failAction: 3,
    handle: true,
  });
  driver.submit({ n: 1, raise: [2, 3, 4] });
  assert.deepEqual(seen, [1, 3, 4]);
  assert.deepEqual(errors, [
    "Error: step 2 at event 2",
    "Error: action 3 at note",
  ]);
});

Deno.test("without handlers, a failure propagates and queued events wait for the next submit", () => {
  const { driver, seen } = recording({ failStep: 2 });
  assert.throws(() => driver.submit({ n: 1, raise: [2, 3] }), /step 2/);
  assert.deepEqual(seen, [1]);
  driver.submit({ n: 5 });
  assert.deepEqual(seen, [1, 3, 5]);
});

Deno.test("stop finishes the current event's actions and drops every later event", () => {
  const ran: string[] = [];
  const driver = makeDriver<null, string, string>({
    state: null,
    step: (_, event) => [`${event}:a`, `${event}:b`],
    run: (action) => {
      ran.push(action);
      if (action === "first:a") {
        driver.submit("queued");
        driver.stop();
      }
    },
  });
  driver.submit("first");
  driver.submit("later");
  assert.deepEqual(ran, ["first:a", "first:b"]);
  assert.deepEqual(driver.stopped, true);
});
