import assert from "node:assert/strict";
import { makeDeadlines } from "./deadlines.ts";

/**
 * Runs `f` with the event loop held open: the shared timer is unref'd (in the
 * worker, each call's socket holds the loop while its deadline is pending).
 */
function heldOpen(f: () => Promise<void>): () => Promise<void> {
  return async () => {
    const hold = setInterval(() => {}, 1000);
    try {
      await f();
    } finally {
      clearInterval(hold);
    }
  };
}

/** A promise `fire` resolves, with when it fired (performance.now()). */
function firing() {
  let fire = () => {};
  const fired = new Promise<number>((r) => fire = () => r(performance.now()));
  return { fire, fired };
}

Deno.test(
  "issue 31: a deadline fires once its time has passed, never before",
  heldOpen(async () => {
    const deadlines = makeDeadlines();
    const a = firing();
    const d = deadlines.add(30, a.fire);
    assert.ok(await a.fired >= d.due);
    assert.equal(deadlines.size(), 0);
  }),
);

Deno.test(
  "issue 31: a cancelled deadline never fires, and the ones beside it still do",
  heldOpen(async () => {
    const deadlines = makeDeadlines();
    const order: string[] = [];
    const last = firing();
    deadlines.add(10, () => order.push("a"));
    const b = deadlines.add(10, () => order.push("b"));
    deadlines.add(20, () => {
      order.push("c");
      last.fire();
    });
    deadlines.cancel(b);
    await last.fired;
    assert.deepEqual(order, ["a", "c"]);
    assert.equal(deadlines.size(), 0);
  }),
);

Deno.test(
  "issue 31: a deadline earlier than the one the shared timer waits for fires at its own time",
  heldOpen(async () => {
    const deadlines = makeDeadlines();
    const order: string[] = [];
    const late = firing();
    const soon = firing();
    deadlines.add(400, () => {
      order.push("late");
      late.fire();
    });
    deadlines.add(10, () => {
      order.push("soon");
      soon.fire();
    });
    await soon.fired;
    assert.deepEqual(order, ["soon"]);
    await late.fired;
    assert.deepEqual(order, ["soon", "late"]);
  }),
);

Deno.test(
  "issue 31: a deadline added by one that fires, or after every one was cancelled, still fires",
  heldOpen(async () => {
    const deadlines = makeDeadlines();
    const gone = deadlines.add(5, () => assert.fail("cancelled"));
    deadlines.cancel(gone);
    const second = firing();
    deadlines.add(10, () => deadlines.add(10, second.fire));
    await second.fired;
    // The timer armed for the cancelled one found nothing; a new one is armed.
    const third = firing();
    deadlines.add(10, third.fire);
    await third.fired;
    assert.equal(deadlines.size(), 0);
  }),
);
