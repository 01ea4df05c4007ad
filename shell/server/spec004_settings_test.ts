// Issue 32: spec 004's settings on a real relay: ENABLE_METRICS, METRICS_PORT,
// ENABLE_MULTI_TENANT, and /health's spec 004 word beside the original's.
import assert from "node:assert/strict";
import { makeConfig } from "../../core/mod.ts";
import { chatBody, registeredWorker, testConfig } from "./_test_helpers.ts";
import {
  autoRespond,
  startTestRelay,
  withTestRelay,
} from "./_relay_test_helpers.ts";

Deno.test("issue 32: METRICS_PORT serves /metrics on a second listener (and only /metrics); the main port keeps it", async () => {
  const relay = await startTestRelay(testConfig({}, { metricsPort: 0 }));
  try {
    assert.equal(typeof relay.metricsPort, "number");
    assert.notEqual(relay.metricsPort, relay.port);
    const side = `http://127.0.0.1:${relay.metricsPort}`;
    const res = await fetch(`${side}/metrics`);
    assert.equal(res.status, 200);
    assert.match(await res.text(), /^# HELP modelrelay_/m);
    const other = await fetch(`${side}/health`);
    assert.equal(other.status, 404);
    assert.match((await other.json()).error.message, /only \/metrics/);
    const main = await fetch(`${relay.url}/metrics`);
    assert.equal(main.status, 200);
    await main.body?.cancel();
  } finally {
    await relay.close();
  }
  // Closed with the relay.
  await assert.rejects(
    fetch(`http://127.0.0.1:${relay.metricsPort}/metrics`),
  );
});

Deno.test("issue 32: ENABLE_METRICS=false: /metrics is 404 and no METRICS_PORT listener opens", async () => {
  await withTestRelay(
    testConfig({}, { enableMetrics: false, metricsPort: 0 }),
    async (relay) => {
      assert.equal(relay.metricsPort, undefined);
      const res = await fetch(`${relay.url}/metrics`);
      assert.equal(res.status, 404);
      await res.body?.cancel();
    },
  );
});

Deno.test("issue 32: ENABLE_MULTI_TENANT=false: X-Tenant-ID is not read and /v1/capabilities says multiTenant false", async () => {
  for (const multiTenant of [true, false]) {
    const config = testConfig();
    const relay = await startTestRelay({
      ...config,
      core: makeConfig({ ...config.core, multiTenant }),
    });
    const w = await registeredWorker(relay);
    const stop = autoRespond(w);
    try {
      const res = await fetch(`${relay.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "x-tenant-id": "not a tenant!" },
        body: chatBody("m1"),
      });
      assert.equal(res.status, multiTenant ? 400 : 200);
      await res.body?.cancel();
      const caps = await (await fetch(`${relay.url}/v1/capabilities`)).json();
      assert.equal(caps.capabilities.multiTenant, multiTenant);
    } finally {
      stop();
      await w.close();
      await relay.close();
    }
  }
});

Deno.test("issue 32: /health keeps the original's status ok and carries spec 004's healthy beside it", async () => {
  await withTestRelay(testConfig(), async (relay) => {
    const res = await fetch(`${relay.url}/health`);
    const body = await res.json();
    assert.equal(res.status, 200);
    assert.equal(body.status, "ok");
    assert.equal(body.health, "healthy");
    for (const field of ["uptime", "modelsLoaded", "queueDepth"]) {
      assert.equal(typeof body[field], "number", field);
    }
  });
});
