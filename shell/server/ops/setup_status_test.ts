// Issue 33.11: the public GET /setup/status names the served models only while
// GET /v1/models is public too. Real relay, a scripted worker.
import assert from "node:assert/strict";
import { registeredWorker, testConfig } from "../_test_helpers.ts";
import { ADMIN_TOKEN, startTestRelay } from "../_relay_test_helpers.ts";

async function statusAndModels(requireApiKeys: boolean) {
  const relay = await startTestRelay(
    testConfig({}, { adminToken: ADMIN_TOKEN, requireApiKeys }),
  );
  const w = await registeredWorker(relay);
  try {
    const status = await (await fetch(`${relay.url}/setup/status`)).json();
    const models = await fetch(`${relay.url}/v1/models`);
    await models.body?.cancel();
    return { status, modelsStatus: models.status };
  } finally {
    await w.close();
    await relay.close();
  }
}

Deno.test("issue 33.11 /setup/status lists no model names once /v1/models needs a key; without required keys it lists what /v1/models lists", async () => {
  const closed = await statusAndModels(true);
  assert.equal(closed.modelsStatus, 401);
  assert.deepEqual(closed.status, {
    workers_connected: 1,
    worker_registrations_total: 1,
  });
  const open = await statusAndModels(false);
  assert.equal(open.modelsStatus, 200);
  assert.deepEqual(open.status.models, ["m1"]);
});
