// Issue 14, "real backends and real faults": each failure seen on main, replayed
// with real processes (server, workers, the mock backend in its fault modes) and
// named after what went wrong.
import assert from "node:assert/strict";
import { type Child, waitUntil } from "../shell/demo/children.ts";
import { startServerProcess } from "../shell/demo/cluster.ts";

const SECRET = "e2e-faults";

/** Stops every child, last started first, whatever the test did. */
async function withChildren(
  body: (started: Child[]) => Promise<void>,
): Promise<void> {
  const started: Child[] = [];
  try {
    await body(started);
  } finally {
    for (const c of started.reverse()) await c.stop(5_000);
  }
}

Deno.test("issue 14.5: /health answers 200 with no worker connected, and says so in the body", async () => {
  await withChildren(async (started) => {
    const server = await startServerProcess({ secret: SECRET });
    started.push(server.child);
    const res = await fetch(`${server.url}/health`);
    const body = await res.json();
    assert.equal(res.status, 200);
    assert.equal(body.status, "ok");
    assert.equal(body.workers_connected, 0);
    assert.equal(body.workers_routable, 0);
    assert.deepEqual(body.warnings, ["no worker connected"]);
    // Shutting down is still 503: a stopping relay must leave the load balancer.
    server.child.kill("SIGTERM");
    await waitUntil("health 503 or the server gone", async () => {
      try {
        return (await fetch(`${server.url}/health`)).status === 503;
      } catch {
        return server.child.exited !== null;
      }
    });
  });
});
