import assert from "node:assert/strict";
import { withTestRelay } from "../_relay_test_helpers.ts";
import { testConfig } from "../_test_helpers.ts";

Deno.test("/metrics answers another method with 405, Allow: GET and the operator error shape", async () => {
  await withTestRelay(testConfig(), async (relay) => {
    const res = await fetch(`${relay.url}/metrics`, { method: "POST" });
    assert.equal(res.status, 405);
    assert.equal(res.headers.get("allow"), "GET");
    assert.equal(
      await res.text(),
      '{"error":{"message":"use GET for /metrics","type":"invalid_request_error","code":"method_not_allowed"}}',
    );
  });
});
