// Issue 33.11: the client's `tracestate` reaches the backend only beside a
// valid `traceparent`, and only within the W3C bounds. Real relay, real
// sockets, a scripted worker reading the request frames.
import assert from "node:assert/strict";
import { chatBody, registeredWorker, testConfig } from "../_test_helpers.ts";
import { startTestRelay } from "../_relay_test_helpers.ts";
import { forwardedTracestate } from "./tracing.ts";

const VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

Deno.test("issue 33.11 an invalid traceparent starts a trace here and the client's tracestate is not forwarded; an oversized tracestate is dropped; a valid pair goes on", async () => {
  const relay = await startTestRelay(testConfig());
  const w = await registeredWorker(relay);
  try {
    const forwarded = async (headers: Record<string, string>) => {
      const pending = fetch(`${relay.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: chatBody("m1"),
      });
      const req = await w.next("request");
      w.complete(req, 200, "{}");
      await (await pending).body?.cancel();
      return req.headers as Record<string, string>;
    };
    const invalid = await forwarded({
      traceparent: "00-nonsense",
      tracestate: "vendor=secret",
    });
    assert.match(invalid.traceparent!, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    assert.equal(invalid.tracestate, undefined);
    const huge = await forwarded({
      traceparent: VALID,
      tracestate: `vendor=${"x".repeat(600)}`,
    });
    assert.match(huge.traceparent!, /^00-4bf92f3577b34da6a3ce929d0e0e4736-/);
    assert.equal(huge.tracestate, undefined);
    const kept = await forwarded({
      traceparent: VALID,
      tracestate: "rojo=00f067aa0ba902b7, congo=t61rcWkgMzE",
    });
    assert.equal(kept.tracestate, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
  } finally {
    await w.close();
    await relay.close();
  }
});

Deno.test("issue 33.11 forwardedTracestate keeps at most 32 well-formed members within 512 characters", () => {
  const members = (n: number) =>
    Array.from({ length: n }, (_, i) => `k${i}=v`).join(",");
  assert.equal(forwardedTracestate(members(32)), members(32));
  assert.equal(forwardedTracestate(members(33)), null);
  assert.equal(forwardedTracestate("a=" + "b".repeat(511)), null);
  assert.equal(forwardedTracestate("Upper=1"), null);
  assert.equal(forwardedTracestate("k=v\u0000"), null);
  assert.equal(forwardedTracestate("no-equals"), null);
  assert.equal(forwardedTracestate("t@sys=v"), "t@sys=v");
});
