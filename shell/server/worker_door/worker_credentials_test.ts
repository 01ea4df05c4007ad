// Issue 32: the original's ways for a worker to present its credentials, on
// real sockets: `?worker_secret=` in the query, and a client API key as the
// secret when the operator turned API_KEYS_AS_WORKER_SECRET on.
import assert from "node:assert/strict";
import { SECRET, testConfig } from "../_test_helpers.ts";
import {
  admin,
  ADMIN_TOKEN,
  postKey,
  startTestRelay,
  type TestRelay,
  withTestRelay,
} from "../_relay_test_helpers.ts";

/** Opens a worker socket with the credential in the query only; resolves how it ended. */
async function attempt(
  relay: TestRelay,
  query: string,
): Promise<"registered" | CloseEvent> {
  const ws = new WebSocket(`${relay.wsUrl}?provider=local&${query}`);
  return await new Promise((resolve) => {
    ws.onopen = () =>
      ws.send(JSON.stringify({
        type: "register",
        worker_name: "q",
        models: ["m1"],
        max_concurrent: 1,
        protocol_version: "2026-04-bridge-v1",
      }));
    ws.onmessage = (e) => {
      if (JSON.parse(e.data as string).type !== "register_ack") return;
      ws.onclose = () => resolve("registered");
      ws.close(1000, "test done");
    };
    ws.onclose = (e) => resolve(e);
  });
}

async function newKey(
  relay: TestRelay,
): Promise<{ id: string; secret: string }> {
  const res = await postKey(relay, { name: "gpu-box" });
  assert.equal(res.status, 201);
  return await res.json();
}

Deno.test("issue 32: a worker may present the secret as ?worker_secret= (the original's name) or ?secret=", async () => {
  await withTestRelay(testConfig(), async (relay) => {
    assert.equal(
      await attempt(relay, `worker_secret=${encodeURIComponent(SECRET)}`),
      "registered",
    );
    assert.equal(
      await attempt(relay, `secret=${encodeURIComponent(SECRET)}`),
      "registered",
    );
    const wrong = await attempt(relay, "worker_secret=wrong");
    assert.notEqual(wrong, "registered");
    assert.equal((wrong as CloseEvent).code, 1008);
  });
});

Deno.test("issue 32: a client API key admits a worker only with API_KEYS_AS_WORKER_SECRET, and not once revoked", async () => {
  for (const on of [false, true]) {
    const relay = await startTestRelay(
      testConfig({}, { adminToken: ADMIN_TOKEN, apiKeysAsWorkerSecret: on }),
    );
    try {
      const key = await newKey(relay);
      const first = await attempt(relay, `worker_secret=${key.secret}`);
      if (!on) {
        assert.equal((first as CloseEvent).code, 1008, "a key is no secret");
        continue;
      }
      assert.equal(first, "registered");
      const revoked = await admin(relay, `/admin/keys/${key.id}`, {
        method: "DELETE",
      });
      await revoked.body?.cancel();
      const after = await attempt(relay, `worker_secret=${key.secret}`);
      assert.equal((after as CloseEvent).code, 1008);
    } finally {
      await relay.close();
    }
  }
});
