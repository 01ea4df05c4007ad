// Issue 33 (LOW 11): an instance woken from SIGSTOP used to blame Redis for
// its own freeze: its Redis commands' timeouts, overdue when it woke, fired
// before the answers already waiting on its sockets were read, and it logged
// "Redis did not answer". The freeze is a gap in its own event loop, which the
// link's watchdog beat sees (redis_link.ts freezeClock); that is what it logs.
import assert from "node:assert/strict";
import { freezeClock } from "./redis_link.ts";
import { withFleet } from "./_fleet.ts";

Deno.test("issue 33: a loss right after the event loop stood still blames this process, not Redis", () => {
  const clock = freezeClock(400, 50);
  // The event loop stands still: nothing else runs for 300 ms.
  const until = Date.now() + 300;
  while (Date.now() < until) { /* frozen */ }
  const reason = clock.blame("Redis did not answer within 400 ms");
  assert.match(reason, /this process stood still for \d+ ms/);
  assert.doesNotMatch(reason, /Redis did not answer/);
});

Deno.test("issue 33, cluster: an instance of 3 stopped (SIGSTOP) longer than CLUSTER_LOG_TIMEOUT_MS, then woken, logs its own freeze as the cause of its log loss, not Redis", async () => {
  await withFleet(
    { workers: [], env: { CLUSTER_LOG_TIMEOUT_MS: "1000" } },
    async (f) => {
      const frozen = f.instances[1]!;
      frozen.child.kill("SIGSTOP");
      // Longer than any command timeout it has out (the log read's is the
      // longest: the limit, plus its block, plus a WAIT).
      await new Promise((r) => setTimeout(r, 4_000));
      frozen.child.kill("SIGCONT");
      const [line] = await frozen.child.waitForLine(/.*cluster log down.*/);
      assert.match(line!, /this process stood still for \d+ ms/);
      const blamed = frozen.child.lines.filter((l) =>
        /Redis did not answer|no connection to Redis/.test(l)
      );
      assert.deepEqual(blamed, []);
    },
  );
});
