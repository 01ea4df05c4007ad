// stream-head-v1 (issue 25, C108): the client's head for a stream that came
// with the backend's, as the shell writes it.
import assert from "node:assert/strict";
import { streamHead } from "./run_effects.ts";

Deno.test("C108 a stream's head is the backend's, filtered as a whole answer's, with the spec 004 headers", () => {
  const h = streamHead({
    status: 200,
    headers: {
      "Content-Type": "application/x-ndjson",
      "content-length": "99",
      "transfer-encoding": "chunked",
      "access-control-allow-origin": "*",
      "x-backend": "raw",
      "bad header": "dropped",
    },
  }, 12);
  assert.equal(h.status, 200);
  assert.equal(h.headers["content-type"], "application/x-ndjson");
  assert.equal(h.headers["x-backend"], "raw");
  assert.equal(h.headers["x-queue-wait-ms"], "12");
  assert.equal(h.headers["x-accel-buffering"], "no");
  for (
    const gone of [
      "content-length",
      "transfer-encoding",
      "access-control-allow-origin",
      "bad header",
    ]
  ) assert.equal(gone in h.headers, false, gone);
});

Deno.test("C108 the backend's own x-accel-buffering wins; a status outside 200-599 becomes 502", () => {
  const h = streamHead({
    status: 101,
    headers: { "content-type": "audio/mpeg", "x-accel-buffering": "yes" },
  }, 0);
  assert.equal(h.headers["x-accel-buffering"], "yes");
  assert.equal(h.status, 502);
});

Deno.test("issue 31 a head keeps the relay's headers, then the backend's in its order, and drops a value node:http refuses even where it overrode a default", () => {
  const h = streamHead({
    status: 200,
    headers: {
      "x-b": "1",
      "X-Cache-Hit": "tr\u0001ue",
      "x-queue-wait-ms": "\u0001",
      "x-a": "2",
    },
  }, 7);
  assert.deepEqual(Object.entries(h.headers), [
    ["x-cache-tokens-reused", "0"],
    ["x-gpu-time-ms", "0"],
    ["x-accel-buffering", "no"],
    ["x-b", "1"],
    ["x-queue-wait-ms", "7"],
    ["x-a", "2"],
  ]);
});
