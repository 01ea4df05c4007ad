import assert from "node:assert/strict";
import { parseTraceparent, traceRequest } from "./tracing.ts";

Deno.test("issue 26 a malformed or all-zero traceparent starts a new trace; a valid one is continued with the relay's span", () => {
  for (
    const bad of [
      undefined,
      "garbage",
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
    ]
  ) {
    assert.equal(parseTraceparent(bad), null, String(bad));
  }
  const headers: Record<string, string> = {
    traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
  };
  const ids = traceRequest(headers);
  assert.equal(ids.traceId, "4bf92f3577b34da6a3ce929d0e0e4736");
  assert.equal(ids.parentSpanId, "00f067aa0ba902b7");
  // The sampled flag the client chose is kept.
  assert.equal(
    headers.traceparent,
    `00-4bf92f3577b34da6a3ce929d0e0e4736-${ids.dispatchSpanId}-00`,
  );
  const fresh: Record<string, string> = { traceparent: "nonsense" };
  const started = traceRequest(fresh);
  assert.equal(started.parentSpanId, null);
  assert.match(fresh.traceparent!, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
});
