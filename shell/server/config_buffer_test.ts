// Issue 33.3's settings, as the server reads them: CLIENT_WRITE_TIMEOUT_SECS
// and TENANT_MAX_BUFFERED_RESPONSE_BYTES (none = half the fleet's budget).
import assert from "node:assert/strict";
import { loadServerConfig } from "./config.ts";
import { tenantBufferBytesMax } from "../../core/state/body_budget.ts";

function load(env: Record<string, string>) {
  const all: Record<string, string> = {
    WORKER_SECRET: "a-long-enough-secret-for-tests",
    ...env,
  };
  const r = loadServerConfig([], (n) => all[n], all);
  if (r.help) throw new Error("help");
  return r.config.core;
}

Deno.test("issue 33.3 CLIENT_WRITE_TIMEOUT_SECS defaults to 30 s; TENANT_MAX_BUFFERED_RESPONSE_BYTES to half of MAX_BUFFERED_RESPONSE_BYTES", () => {
  const core = load({ MAX_BUFFERED_RESPONSE_BYTES: "1000" });
  assert.equal(core.clientWriteTimeoutMs, 30_000);
  assert.equal(core.tenantResponseBufferBytesMax, null);
  assert.equal(tenantBufferBytesMax(core), 500);
  const set = load({
    CLIENT_WRITE_TIMEOUT_SECS: "5",
    TENANT_MAX_BUFFERED_RESPONSE_BYTES: "123",
  });
  assert.equal(set.clientWriteTimeoutMs, 5_000);
  assert.equal(tenantBufferBytesMax(set), 123);
});

Deno.test("issue 33.3 an invalid TENANT_MAX_BUFFERED_RESPONSE_BYTES or CLIENT_WRITE_TIMEOUT_SECS stops the start naming the variable", () => {
  assert.throws(
    () => load({ TENANT_MAX_BUFFERED_RESPONSE_BYTES: "half" }),
    /TENANT_MAX_BUFFERED_RESPONSE_BYTES/,
  );
  assert.throws(
    () => load({ TENANT_MAX_BUFFERED_RESPONSE_BYTES: "0" }),
    /TENANT_MAX_BUFFERED_RESPONSE_BYTES/,
  );
  assert.throws(
    () => load({ CLIENT_WRITE_TIMEOUT_SECS: "0" }),
    /CLIENT_WRITE_TIMEOUT_SECS/,
  );
});
