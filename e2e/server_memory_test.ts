// Issue 24, item 2: large non-streaming answers through real processes (a raw
// backend answering 200 MiB, a real worker, a real server): the server passes
// them on as the pieces the worker sent, and a fleet-wide budget
// (MAX_BUFFERED_RESPONSE_BYTES) bounds what it holds. On main (3c0e934) one
// such answer raised the server by ~680 MiB and three at once by ~1.5 GiB.
import assert from "node:assert/strict";
import { bigChat, startBigBodyBackend } from "./_big_body_backend.ts";
import {
  faultTest,
  rssMiB,
  startServer,
  startWorker,
  withChildren,
} from "./_faults.ts";

const MIB = 1024 * 1024;

/** Samples a process's RSS every 10 ms while `body` runs; the highest seen. */
async function peakRssWhile<T>(
  pid: number,
  body: () => Promise<T>,
): Promise<{ result: T; before: number; peak: number }> {
  const before = await rssMiB(pid);
  let peak = before;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      peak = Math.max(peak, await rssMiB(pid));
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  try {
    return { result: await body(), before, peak };
  } finally {
    sampling = false;
    await sampler;
  }
}

async function relayWithBigBackend(
  started: Parameters<Parameters<typeof withChildren>[0]>[0],
  env: Record<string, string>,
) {
  const backend = await startBigBodyBackend(200 * MIB);
  const server = await startServer(started, { LOG_LEVEL: "info", ...env });
  await startWorker(started, "big", server, backend.url, {
    MAX_CONCURRENT: "4",
  });
  const pid = started.find((c) => c.name === "server")!.pid;
  return { backend, server, pid };
}

faultTest(
  "issue 24.2 bounded server memory: a raw backend's 200 MiB answer reaches the client whole, and the server grows by less than 2x the answer (main grew 3.4x)",
  async (started) => {
    const { backend, server, pid } = await relayWithBigBackend(started, {
      MAX_RESPONSE_BODY_BYTES: String(256 * MIB),
    });
    try {
      const { result, before, peak } = await peakRssWhile(
        pid,
        () => bigChat(server, "big-model"),
      );
      assert.equal(result.status, 200, result.head);
      assert.equal(result.bytes, 200 * MIB);
      assert.match(result.head, /^\{"id":"chatcmpl-big"/);
      // The 1.5x target is measured in bench/mem_probe.ts (bench/README.md:
      // +272 MiB); here the bound leaves room for when V8 collects the
      // frames' garbage on a loaded box (+305 MiB seen), and still fails the
      // old code (+675 MiB).
      assert.ok(
        peak - before < 400,
        `server RSS grew by ${Math.round(peak - before)} MiB`,
      );
    } finally {
      await backend.close();
    }
  },
);

faultTest(
  "issue 24.2 bounded server memory: three 200 MiB answers at once stay within the fleet budget: each is whole or 503 response_buffer_full with Retry-After, never an out-of-memory",
  async (started) => {
    const budget = 400;
    const { backend, server, pid } = await relayWithBigBackend(started, {
      MAX_RESPONSE_BODY_BYTES: String(256 * MIB),
      MAX_BUFFERED_RESPONSE_BYTES: String(budget * MIB),
    });
    try {
      const { result, before, peak } = await peakRssWhile(
        pid,
        () =>
          Promise.all([
            bigChat(server, "big-model"),
            bigChat(server, "big-model"),
            bigChat(server, "big-model"),
          ]),
      );
      for (const a of result) {
        if (a.status === 200) assert.equal(a.bytes, 200 * MIB);
        else {
          assert.equal(a.status, 503, a.head);
          assert.equal(JSON.parse(a.head).error.code, "response_buffer_full");
          assert.ok(Number(a.retry) >= 1, `Retry-After ${a.retry}`);
        }
      }
      assert.ok(result.some((a) => a.status === 200), "one at least fits");
      // Measured ~1.3x the budget: the pieces held plus the frames' garbage
      // V8 has not collected yet (bench/README.md); main grew by ~1.5 GiB.
      assert.ok(
        peak - before < budget * 1.6,
        `server RSS grew by ${Math.round(peak - before)} MiB`,
      );
      // Still serving, and the budget was given back.
      const again = await bigChat(server, "big-model");
      assert.equal(again.status, 200, again.head);
    } finally {
      await backend.close();
    }
  },
);
