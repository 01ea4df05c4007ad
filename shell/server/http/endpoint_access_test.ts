// Issue 15: nothing public names workers or tenants. Real relay, real keys.
import assert from "node:assert/strict";
import {
  ADMIN_TOKEN,
  autoRespond,
  postKey,
  startTestRelay,
  type TestRelay,
} from "../_relay_test_helpers.ts";
import { chatBody, registeredWorker, testConfig } from "../_test_helpers.ts";

const METRICS_TOKEN = "prometheus-scrape-token";

async function newKey(relay: TestRelay): Promise<string> {
  const res = await postKey(relay, { name: "client", tenant: "secret-tenant" });
  assert.equal(res.status, 201);
  return (await res.json()).key;
}

function get(
  relay: TestRelay,
  path: string,
  token: string | null,
): Promise<Response> {
  return fetch(relay.url + path, {
    headers: token === null ? {} : { authorization: `Bearer ${token}` },
  });
}

Deno.test("metrics need the admin token or METRICS_TOKEN when keys are required", async () => {
  const relay = await startTestRelay(testConfig({}, {
    adminToken: ADMIN_TOKEN,
    requireApiKeys: true,
    metricsToken: METRICS_TOKEN,
  }));
  const w = await registeredWorker(relay);
  const stop = autoRespond(w);
  try {
    const key = await newKey(relay);
    const chat = await fetch(`${relay.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}` },
      body: chatBody(),
    });
    assert.equal(chat.status, 200);
    await chat.text();

    const none = await get(relay, "/metrics", null);
    assert.equal(none.status, 401);
    assert.match(none.headers.get("www-authenticate") ?? "", /^Bearer/);
    const noneText = await none.text();
    assert.equal(JSON.parse(noneText).error.code, "missing_metrics_token");
    assert.doesNotMatch(noneText, /secret-tenant/);
    for (const wrong of [key, "not-the-token"]) {
      const res = await get(relay, "/metrics", wrong);
      assert.equal(res.status, 403);
      assert.equal((await res.json()).error.code, "invalid_metrics_token");
    }
    for (const token of [METRICS_TOKEN, ADMIN_TOKEN]) {
      const res = await get(relay, "/metrics", token);
      assert.equal(res.status, 200);
      const text = await res.text();
      assert.match(text, /tenant="secret-tenant"/);
      assert.match(
        text,
        /modelrelay_auth_failures_total\{kind="metrics_token"\} [1-9]/,
      );
    }
  } finally {
    stop();
    await w.close();
    await relay.close();
  }
});

Deno.test("without required keys /metrics stays open, unless METRICS_TOKEN is set", async () => {
  const open = await startTestRelay(testConfig());
  try {
    const res = await get(open, "/metrics", null);
    assert.equal(res.status, 200);
    await res.text();
  } finally {
    await open.close();
  }
  const guarded = await startTestRelay(
    testConfig({}, { metricsToken: METRICS_TOKEN }),
  );
  try {
    const none = await get(guarded, "/metrics", null);
    assert.equal(none.status, 401);
    await none.body?.cancel();
    const ok = await get(guarded, "/metrics", METRICS_TOKEN);
    assert.equal(ok.status, 200);
    await ok.text();
  } finally {
    await guarded.close();
  }
});

Deno.test("capabilities show no worker names to a client key; the admin token sees them", async () => {
  const relay = await startTestRelay(testConfig({}, {
    adminToken: ADMIN_TOKEN,
    requireApiKeys: true,
  }));
  const w = await registeredWorker(relay, {
    worker_name: "gpu-box-in-room-7",
    models: ["m1"],
  });
  const workerId = w.ack.worker_id as string;
  try {
    const none = await get(relay, "/v1/capabilities", null);
    assert.equal(none.status, 401);
    assert.equal((await none.json()).error.code, "missing_api_key");
    const bad = await get(relay, "/v1/capabilities", "mr-not-a-key");
    assert.equal(bad.status, 401);
    await bad.body?.cancel();

    const key = await newKey(relay);
    const client = await get(relay, "/v1/capabilities", key);
    assert.equal(client.status, 200);
    const text = await client.text();
    assert.doesNotMatch(text, /gpu-box-in-room-7/);
    assert.ok(!text.includes(workerId), "no worker id");
    const doc = JSON.parse(text);
    assert.equal(doc.workers, undefined);
    assert.deepEqual(doc.models.loaded.map((m: { id: string }) => m.id), [
      "m1",
    ]);
    assert.equal(doc.health, "healthy");
    assert.equal(typeof doc.queue.depth, "number");
    const one = await get(relay, `/v1/capabilities?worker=${workerId}`, key);
    assert.equal(one.status, 403);
    assert.equal((await one.json()).error.code, "admin_only");

    const full = await get(relay, "/v1/capabilities", ADMIN_TOKEN);
    assert.equal(full.status, 200);
    const fullDoc = await full.json();
    assert.equal(fullDoc.workers[0].name, "gpu-box-in-room-7");
    assert.equal(fullDoc.workers[0].workerId, workerId);
  } finally {
    await w.close();
    await relay.close();
  }
});

Deno.test("without required keys capabilities show the fleet (models, queue, health) without worker names or ids", async () => {
  const relay = await startTestRelay(testConfig());
  const w = await registeredWorker(relay, {
    worker_name: "gpu-box-in-room-7",
    models: ["m1"],
  });
  try {
    const res = await get(relay, "/v1/capabilities", null);
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.doesNotMatch(text, /gpu-box-in-room-7/);
    assert.ok(!text.includes(w.ack.worker_id as string));
    const doc = JSON.parse(text);
    assert.deepEqual(doc.models.loaded, [{ id: "m1" }]);
    assert.equal(doc.health, "healthy");
    assert.equal(doc.queue.maxDepth, 100);
  } finally {
    await w.close();
    await relay.close();
  }
});

Deno.test("issue 24.7 /v1/models wants a client key when keys are required (401 without, 200 with a key, either header), and stays open without required keys", async () => {
  const relay = await startTestRelay(testConfig({}, {
    adminToken: ADMIN_TOKEN,
    requireApiKeys: true,
  }));
  const w = await registeredWorker(relay);
  try {
    const none = await get(relay, "/v1/models", null);
    assert.equal(none.status, 401);
    assert.equal((await none.json()).error.code, "missing_api_key");
    const wrong = await get(relay, "/v1/models", "mr-not-a-key");
    assert.equal(wrong.status, 401);
    await wrong.body?.cancel();
    const key = await newKey(relay);
    const ok = await get(relay, "/v1/models", key);
    assert.equal(ok.status, 200);
    assert.ok(
      (await ok.json()).data.some((m: { id: string }) => m.id === "m1"),
    );
    // The Anthropic SDK's models.list sends x-api-key.
    const anthropic = await fetch(relay.url + "/v1/models", {
      headers: { "x-api-key": key },
    });
    assert.equal(anthropic.status, 200);
    await anthropic.body?.cancel();
    // Issue 25: one model (models.retrieve) likewise.
    const one = await get(relay, "/v1/models/m1", null);
    assert.equal(one.status, 401);
    await one.body?.cancel();
    const oneOk = await get(relay, "/v1/models/m1", key);
    assert.equal(oneOk.status, 200);
    assert.equal((await oneOk.json()).id, "m1");
  } finally {
    await w.close();
    await relay.close();
  }
  const open = await startTestRelay(testConfig({}, {}));
  try {
    const res = await get(open, "/v1/models", null);
    assert.equal(res.status, 200);
    await res.body?.cancel();
  } finally {
    await open.close();
  }
});
