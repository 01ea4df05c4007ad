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

Deno.test("issue 14.6: POST /admin/keys returns the original's fields, the new key as `secret`", async () => {
  await withChildren(async (started) => {
    const server = await startServerProcess({
      secret: SECRET,
      adminToken: "e2e-admin",
      env: { MODELRELAY_REQUIRE_API_KEYS: "true", QUEUE_TIMEOUT_SECS: "1" },
    });
    started.push(server.child);
    const res = await fetch(`${server.url}/admin/keys`, {
      method: "POST",
      headers: {
        authorization: "Bearer e2e-admin",
        "content-type": "application/json",
      },
      body: JSON.stringify({ name: "production-app" }),
    });
    const created = await res.json();
    assert.equal(res.status, 201);
    for (
      const field of [
        "id",
        "name",
        "prefix",
        "created_at",
        "last_used_at",
        "revoked",
        "secret",
      ]
    ) {
      assert.ok(
        field in created,
        `no "${field}" in ${JSON.stringify(created)}`,
      );
    }
    assert.equal(created.name, "production-app");
    assert.equal(created.revoked, false);
    assert.equal(created.last_used_at, null);
    assert.match(created.secret, /^mr-/);
    assert.ok(created.secret.startsWith(created.prefix));
    // The secret is the key clients send: with it a request passes the key
    // check and waits for a worker (504 after 1 s) instead of a 401.
    const ask = (key: string) =>
      fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
        },
        body: JSON.stringify({ model: "m", messages: [] }),
      }).then(async (r) => {
        await r.body?.cancel();
        return r.status;
      });
    assert.equal(await ask("mr-wrong"), 401);
    assert.equal(await ask(created.secret), 504);
  });
});
