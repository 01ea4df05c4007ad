// The worker door under fuzz (issue 15): fake workers send random and malformed
// WebSocket traffic (unknown types, wrong field types, ids of other workers'
// requests, frames in the wrong state, binary frames, floods, broken framing).
// The relay logs no error, the legit stream alongside is unchanged to the byte,
// and /health and a normal request still succeed afterwards. `deno task fuzz`
// runs many more cases (FUZZ_RUNS).
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  frameText,
  fuzzRuns,
  fuzzSeed,
  type WorkerFrame,
  workerFrames,
  type WorkerOpening,
  workerOpening,
} from "./_fuzz_gen.ts";
import { type FuzzRelay, startFuzzRelay } from "./_fuzz_harness.ts";
import { rawConnect, upgradeRequest } from "./_raw_socket.ts";
import { SECRET } from "./_test_helpers.ts";

const CI_RUNS = 2000;
const BOUND_MS = 5000;

function within<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${what} took over ${BOUND_MS} ms`)),
        BOUND_MS,
      );
    }),
  ]);
}

async function fakeWorker(
  h: FuzzRelay,
  opening: WorkerOpening,
  frames: WorkerFrame[],
  abrupt: boolean,
  registerFirst: boolean,
): Promise<void> {
  const secret = opening.secret === "right"
    ? SECRET
    : opening.secret === "wrong"
    ? "not-the-secret"
    : undefined;
  const ws = new WebSocket(`${h.relay.wsUrl}?${opening.query}`, {
    headers: secret === undefined ? {} : { "x-worker-secret": secret },
  } as unknown as string[]);
  ws.binaryType = "arraybuffer";
  const closed = new Promise<CloseEvent>((r) => ws.onclose = r);
  const opened = await within(
    Promise.race([
      new Promise<boolean>((r) => ws.onopen = () => r(true)),
      closed.then(() => false),
    ]),
    "the handshake",
  );
  if (!opened) return;
  // Half the cases register properly first, so the frames after it meet a
  // registered worker (most random first frames are refused with 1002).
  if (registerFirst) {
    ws.send(JSON.stringify({
      type: "register",
      worker_name: "fuzz",
      models: ["fuzz-model", "legit-stream"],
      max_concurrent: 4,
      protocol_version: "2026-04-bridge-v1",
    }));
  }
  for (const f of frames) {
    if (ws.readyState !== WebSocket.OPEN) break;
    if (f.kind === "binary") ws.send(f.data);
    else if (f.kind === "text") ws.send(f.data);
    else {
      const text = frameText(f.value, h.ids());
      const times = f.kind === "flood" ? f.count : 1;
      for (let i = 0; i < times; i++) ws.send(text);
    }
  }
  if (
    ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING
  ) {
    if (abrupt) ws.close(4000, "fuzz: abrupt");
    else ws.close(1000, "fuzz: done");
  }
  await within(closed, "the close");
}

/** Broken framing only a raw socket can send, after a valid handshake. */
async function rawWorker(h: FuzzRelay, bytes: Uint8Array): Promise<void> {
  const c = await rawConnect(h.relay.port);
  try {
    await c.write(upgradeRequest({ "x-worker-secret": SECRET }));
    await c.write(bytes).catch(() => {});
    await c.conn.closeWrite().catch(() => {});
    await within(c.ended, "the server's end of a raw worker");
  } finally {
    c.close();
  }
}

type WorkerCase =
  | {
    kind: "ws";
    opening: WorkerOpening;
    frames: WorkerFrame[];
    abrupt: boolean;
    registerFirst: boolean;
  }
  | { kind: "raw"; bytes: Uint8Array };

const workerCase: fc.Arbitrary<WorkerCase> = fc.oneof(
  {
    weight: 9,
    arbitrary: fc.record({
      opening: workerOpening,
      frames: workerFrames,
      abrupt: fc.boolean(),
      registerFirst: fc.boolean(),
    }).map((c) => ({ kind: "ws" as const, ...c })),
  },
  {
    weight: 1,
    arbitrary: fc.uint8Array({ minLength: 1, maxLength: 300 }).map((bytes) => ({
      kind: "raw" as const,
      bytes,
    })),
  },
);

Deno.test("issue 15 fuzz: random and malformed worker traffic never crashes the relay or touches another client's stream", async () => {
  const h = await startFuzzRelay();
  try {
    await fc.assert(
      fc.asyncProperty(workerCase, async (c) => {
        if (c.kind === "ws") {
          await fakeWorker(h, c.opening, c.frames, c.abrupt, c.registerFirst);
        } else await rawWorker(h, c.bytes);
        await h.step();
        assert.deepEqual(h.errors, []);
      }),
      // A broken stream stays broken, so shrinking would blame whatever case
      // runs next: report the first failing case as it was.
      { numRuns: fuzzRuns(CI_RUNS), seed: fuzzSeed(), endOnFailure: true },
    );
    await h.finish();
  } finally {
    await h.close();
  }
});
