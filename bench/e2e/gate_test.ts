import assert from "node:assert/strict";
import { cpuFigure } from "./cpu.ts";
import { CEILING_SERVER_SHARE_B, cpuGate, serverShare } from "./gate.ts";
import type { ScenarioResult } from "./scenarios.ts";

/** A scenario whose relay path spent these ns per role over 1,000 chunks. */
function scenario(id: string, serverNs: number, backendNs: number) {
  const result: ScenarioResult = {
    id,
    title: id,
    params: {},
    figures: [],
    cpu: [cpuFigure("relay", "chunk", {
      units: 1000,
      rounds: 1,
      cpuNs: {
        backend: backendNs,
        server: serverNs,
        worker: 3e6,
        nginx: 0,
        naive: 0,
        base: 0,
        loadgen: 1e6,
      },
    }, {
      backend: [1],
      server: [2],
      worker: [3],
      nginx: [],
      naive: [],
      base: [],
      loadgen: [4],
    })],
  };
  return result;
}

Deno.test("the CPU gate compares the server with the backend of the same rounds, not with a fixed figure", () => {
  // 1.5 µs a chunk fails a fixed 1.1 µs ceiling; beside a backend at 3.5 µs it
  // is the share a slower machine measures, and passes.
  const slowMachine = cpuGate([
    scenario("a", 3e6, 4e6),
    scenario("b", 1.5e6, 3.5e6),
  ]);
  assert.equal(slowMachine.ok, true);
  assert.deepEqual(serverShare(scenario("b", 1.5e6, 3.5e6)), {
    scenario: "b",
    serverUs: 1.5,
    backendUs: 3.5,
    share: 0.429,
  });
  // The same server work doubled beside the same backend fails.
  const doubled = cpuGate([scenario("b", 3e6, 3.5e6)]);
  assert.equal(doubled.ok, false);
  assert.match(
    doubled.ok ? "" : doubled.reason,
    new RegExp(
      `3 µs a chunk in \\(b\\), 0\\.857 .* ceiling ${CEILING_SERVER_SHARE_B}`,
    ),
  );
});

Deno.test("the CPU gate fails when (b) has no CPU figure to judge", () => {
  const missing = cpuGate([scenario("a", 1e6, 3e6)]);
  assert.equal(missing.ok, false);
});
