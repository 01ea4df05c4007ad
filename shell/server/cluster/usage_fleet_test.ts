import assert from "node:assert/strict";
import { peersToAsk } from "./usage_fleet.ts";

Deno.test("peersToAsk asks each other process once: not itself under an old id, not one address twice, and names one without an address", () => {
  const instances = new Map([
    ["i-self", { lastSeenMs: 10, peerUrl: "http://a:1" }],
    // This process before it rejoined, not yet declared dead.
    ["i-self-old", { lastSeenMs: 5, peerUrl: "http://a:1" }],
    ["i-b-old", { lastSeenMs: 3, peerUrl: "http://b:1" }],
    ["i-b", { lastSeenMs: 9, peerUrl: "http://b:1" }],
    ["i-c", { lastSeenMs: 8, peerUrl: "http://c:1" }],
    ["i-d", { lastSeenMs: 8 }],
  ]);
  assert.deepEqual(
    peersToAsk(instances, "i-self").sort((x, y) => x.id < y.id ? -1 : 1),
    [
      { id: "i-b", url: "http://b:1" },
      { id: "i-c", url: "http://c:1" },
      { id: "i-d", url: undefined },
    ],
  );
  // Before its own first record is applied, every other address is asked.
  assert.equal(peersToAsk(instances, "i-new").length, 4);
});
