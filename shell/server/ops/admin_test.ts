import assert from "node:assert/strict";
import {
  admin,
  ADMIN_TOKEN,
  autoRespond,
  withTestRelay,
} from "../_relay_test_helpers.ts";
import {
  chatBody,
  registeredWorker,
  testConfig,
  waitFor,
} from "../_test_helpers.ts";

const ADMIN_ROUTES: [string, string][] = [
  ["GET", "/admin/workers"],
  ["GET", "/admin/stats"],
  ["GET", "/admin/keys"],
  ["POST", "/admin/keys"],
  ["DELETE", "/admin/keys/key_0"],
  ["POST", "/admin/workers/w1/drain"],
];

Deno.test("C35 admin answers 403 on every route when MODELRELAY_ADMIN_TOKEN is unset, saying how to enable it", async () => {
  await withTestRelay(testConfig(), async (relay) => {
    for (const [method, path] of ADMIN_ROUTES) {
      const res = await admin(relay, path, { method }, "anything");
      assert.equal(res.status, 403, `${method} ${path}`);
      const body = await res.json();
      assert.equal(body.error.code, "admin_disabled");
      assert.match(body.error.message, /MODELRELAY_ADMIN_TOKEN/);
    }
    // No key database is opened when nothing can use it.
    assert.equal(relay.keys, null);
  });
});

Deno.test("C35 admin answers 403 without the token or with a wrong one, and counts the failure", async () => {
  await withTestRelay(
    testConfig({}, { adminToken: ADMIN_TOKEN }),
    async (relay) => {
      for (const [method, path] of ADMIN_ROUTES) {
        const none = await fetch(`${relay.url}${path}`, { method });
        assert.equal(none.status, 403, `${method} ${path}`);
        assert.equal((await none.json()).error.code, "missing_admin_token");
        const wrong = await admin(relay, path, { method }, ADMIN_TOKEN + "x");
        assert.equal(wrong.status, 403);
        assert.equal((await wrong.json()).error.code, "invalid_admin_token");
      }
      assert.equal(
        relay.metrics.authFailures.get("admin_token"),
        ADMIN_ROUTES.length * 2,
      );
      const ok = await admin(relay, "/admin/stats");
      assert.equal(ok.status, 200);
      await ok.body?.cancel();
      // The original also takes the token bare, without "Bearer " (issue 32).
      const bare = await fetch(`${relay.url}/admin/stats`, {
        headers: { authorization: ADMIN_TOKEN },
      });
      assert.equal(bare.status, 200);
      await bare.body?.cancel();
      const bareWrong = await fetch(`${relay.url}/admin/stats`, {
        headers: { authorization: ADMIN_TOKEN + "x" },
      });
      assert.equal((await bareWrong.json()).error.code, "invalid_admin_token");
    },
  );
});

Deno.test("admin lists workers with load and models, stats count requests, drain takes a worker out of rotation", async () => {
  await withTestRelay(
    testConfig({}, { adminToken: ADMIN_TOKEN }),
    async (relay) => {
      const w = await registeredWorker(relay, {
        worker_name: "gpu-box-1",
        models: ["m1", "m2"],
        max_concurrent: 3,
      });
      const stop = autoRespond(w);
      const list = await (await admin(relay, "/admin/workers")).json();
      assert.equal(list.workers.length, 1);
      const view = list.workers[0];
      assert.equal(view.id, w.ack.worker_id);
      assert.equal(view.name, "gpu-box-1");
      assert.deepEqual(view.models, ["m1", "m2"]);
      assert.equal(view.max_concurrent, 3);
      assert.equal(view.load, 0);
      assert.equal(view.in_flight, 0);
      assert.equal(view.draining, false);
      // The original's field names for the same facts (issue 32).
      assert.equal(view.worker_id, w.ack.worker_id);
      assert.equal(view.worker_name, "gpu-box-1");
      assert.equal(view.provider, "local");
      assert.equal(view.reported_load, 0);
      assert.equal(view.in_flight_count, 0);
      assert.equal(view.is_draining, false);
      assert.match(view.connected_since, /^\d{4}-\d\d-\d\dT/);
      assert.match(view.last_heartbeat, /^\d{4}-\d\d-\d\dT/);
      assert.ok(
        Math.abs(Date.parse(view.connected_since) - Date.now()) < 60_000,
      );

      for (const stream of [false, true]) {
        const res = await fetch(`${relay.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: chatBody("m1", stream),
        });
        assert.equal(res.status, 200);
        await res.text();
      }
      const stats = await (await admin(relay, "/admin/stats")).json();
      assert.equal(stats.workers_connected, 1);
      assert.equal(stats.requests_total, 2);
      assert.equal(stats.requests_by_outcome.completed, 2);
      // The original's shape (issue 32): depth by provider, active workers.
      assert.deepEqual(stats.queue_depth, { local: 0 });
      assert.equal(stats.active_workers, 1);
      assert.equal(stats.queue_depth_total, 0);
      assert.deepEqual(stats.queue_depth_by_provider, { local: 0 });
      assert.equal(stats.in_flight, 0);
      assert.equal(stats.chunks_streamed_total, 2);
      assert.ok(stats.bytes_streamed_total > 0);
      assert.equal(typeof stats.latency_ms.p50, "number");
      assert.equal(typeof stats.time_to_first_byte_ms.p95, "number");

      const missing = await admin(relay, "/admin/workers/nope/drain", {
        method: "POST",
      });
      assert.equal(missing.status, 404);
      await missing.body?.cancel();
      const drained = await admin(
        relay,
        `/admin/workers/${w.ack.worker_id}/drain`,
        { method: "POST" },
      );
      assert.equal(drained.status, 202);
      assert.equal((await drained.json()).draining, true);
      const shutdown = await w.next("graceful_shutdown");
      assert.match(String(shutdown.reason), /operator/);
      // Idle, so the relay closes it; the worker is gone from the list.
      await waitFor(
        "the relay to close the drained worker",
        () => w.ws.readyState === WebSocket.CLOSED,
      );
      await waitFor("the drained worker to leave the list", async () => {
        const l = await (await admin(relay, "/admin/workers")).json();
        return l.workers.length === 0;
      });
      stop();
    },
  );
});

Deno.test("admin answers 405 for a wrong method and 404 for an unknown admin path", async () => {
  await withTestRelay(
    testConfig({}, { adminToken: ADMIN_TOKEN }),
    async (relay) => {
      const wrong = await admin(relay, "/admin/stats", { method: "POST" });
      assert.equal(wrong.status, 405);
      assert.equal(wrong.headers.get("allow"), "GET");
      await wrong.body?.cancel();
      const unknown = await admin(relay, "/admin/nothing");
      assert.equal(unknown.status, 404);
      await unknown.body?.cancel();
    },
  );
});
