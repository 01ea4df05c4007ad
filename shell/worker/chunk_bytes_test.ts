// chunk-bytes-v1 (issue 18) at the worker's edge: the same backend bytes reach
// the proxy as binary frames when the proxy acked the extension, as
// response_chunk text frames when it did not (an original server), and the
// bytes a client would get are identical either way (C45).
import assert from "node:assert/strict";
import { startScriptedBackend } from "../../mock/scripted.ts";
import { EXTENSION_CHUNK_BYTES } from "../../core/protocol/mod.ts";
import { waitFor, within } from "../procs.ts";
import { type Frame, startTestProxy } from "./_test_proxy.ts";
import { requestFrame, runTestWorker, testConfig } from "./_test_worker.ts";

/** A backend streaming `writes` as separate reads (a pause between them). */
function rawBackend(writes: Uint8Array[]) {
  return startScriptedBackend(() => Promise.resolve(writes), 15);
}

const b = (...xs: (string | number[])[]) =>
  Buffer.concat(
    xs.map((x) => typeof x === "string" ? Buffer.from(x) : Buffer.from(x)),
  );

/** Multi-byte characters cut across writes. */
const SPLIT = [
  b("data: h", [0xc3]),
  b([0xa9], "llo ", [0xe2, 0x82]),
  b([0xac], "\n\n", [0xf0, 0x9f]),
  b([0x98]),
  b([0x80], " done\n\n"),
];
/** Invalid UTF-8: a stray byte, a bad sequence, a surrogate, a cut character at the end. */
const INVALID = [
  b("data: a", [0xff], " b", [0xc3]),
  b("(\n\n", [0xed, 0xa0, 0x80], " x", [0xe2, 0x82]),
  b("A\n\n"),
  b("end ", [0xf0, 0x9f]),
];

/** What reached the proxy for r1: the bytes a client gets, and the frame kinds. */
async function streamThrough(
  writes: Uint8Array[],
  ackExtensions: string[] | undefined,
): Promise<{ bytes: Buffer; kinds: Set<string> }> {
  const backend = rawBackend(writes);
  const proxy = await startTestProxy(
    ackExtensions === undefined ? {} : { ackExtensions },
  );
  const worker = runTestWorker(testConfig(proxy.url, backend.url));
  try {
    await waitFor(
      "registered",
      () => worker.logs.some((l) => l.message === "registered"),
    );
    proxy.send(requestFrame("r1", { stream: true }));
    await proxy.waitFrame("complete", (f) => f.type === "response_complete");
    const frames = proxy.frames.filter((f: Frame) =>
      f.request_id === "r1" && f.type !== "response_complete"
    );
    return {
      bytes: Buffer.concat(
        frames.map((f) =>
          f.type === "binary_chunk"
            ? f.bytes as Uint8Array
            : Buffer.from(f.chunk as string, "utf8")
        ),
      ),
      kinds: new Set(frames.map((f) => f.type as string)),
    };
  } finally {
    worker.signal();
    await within("worker to stop", worker.done);
    await proxy.close();
    await backend.close();
  }
}

Deno.test("issue 18 the worker lists chunk-bytes-v1 and sends binary chunk frames only to a proxy that acked it", async () => {
  const ours = await streamThrough(SPLIT, [EXTENSION_CHUNK_BYTES]);
  assert.deepEqual([...ours.kinds], ["binary_chunk"]);
  // An original server (no extensions in its ack) never sees a binary frame.
  const original = await streamThrough(SPLIT, undefined);
  assert.deepEqual([...original.kinds], ["response_chunk"]);
  // Our server without this extension: text too.
  const older = await streamThrough(SPLIT, ["drain-v1"]);
  assert.deepEqual([...older.kinds], ["response_chunk"]);
});

Deno.test("C45 characters split across backend reads: binary and text paths deliver the backend's very bytes", async () => {
  const ours = await streamThrough(SPLIT, [EXTENSION_CHUNK_BYTES]);
  const original = await streamThrough(SPLIT, undefined);
  assert.deepEqual(ours.bytes, Buffer.concat(SPLIT));
  assert.deepEqual(original.bytes, Buffer.concat(SPLIT));
});

Deno.test("C45 invalid UTF-8 from the backend: the binary path delivers exactly what the text path does (U+FFFD)", async () => {
  const ours = await streamThrough(INVALID, [EXTENSION_CHUNK_BYTES]);
  const original = await streamThrough(INVALID, undefined);
  assert.deepEqual(ours.bytes, original.bytes);
  assert.deepEqual(
    ours.bytes,
    Buffer.from(new TextDecoder().decode(Buffer.concat(INVALID)), "utf8"),
  );
});
