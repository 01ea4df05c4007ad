import assert from "node:assert/strict";
import {
  binaryChunkIdFits,
  decodeBinaryWorkerFrame,
  encodeBinaryChunkFrame,
} from "./binary.ts";

const text = (s: string) => new TextEncoder().encode(s);

Deno.test("issue 18 a binary chunk frame decodes to its request id and a subarray of its bytes", () => {
  const payload = text("data: h\u00e9llo\n\n");
  const frame = encodeBinaryChunkFrame("req-1", payload);
  assert.deepEqual([...frame.subarray(0, 7)], [1, 5, ...text("req-1")]);
  const d = decodeBinaryWorkerFrame(frame, 1024);
  assert.ok(d.ok);
  assert.equal(d.message.requestId, "req-1");
  assert.deepEqual(d.message.chunk, payload);
  // No copy: the chunk is a view into the frame.
  assert.equal(d.message.chunk.buffer, frame.buffer);
  assert.equal(d.message.chunk.byteOffset, 7);
});

Deno.test("issue 18 a truncated header, an unknown kind byte or a bad id is a typed error, never a throw", () => {
  const cases: [string, Uint8Array][] = [
    ["empty", new Uint8Array()],
    ["kind only", new Uint8Array([1])],
    ["id cut short", new Uint8Array([1, 9, 0x72, 0x31])],
    ["empty id", new Uint8Array([1, 0, 0x41])],
    ["unknown kind", new Uint8Array([2, 1, 0x72, 0x41])],
    ["JSON sent as binary", text('{"type":"pong"}')],
    ["id not printable ASCII", new Uint8Array([1, 2, 0xc3, 0xa9, 0x41])],
  ];
  for (const [label, frame] of cases) {
    const d = decodeBinaryWorkerFrame(frame, 1024);
    assert.equal(d.ok, false, label);
    if (!d.ok) assert.equal(d.error.kind, "badBinaryFrame", label);
  }
});

Deno.test("issue 18 the frame limit bounds a binary frame in bytes", () => {
  const frame = encodeBinaryChunkFrame("r", new Uint8Array(100));
  assert.equal(decodeBinaryWorkerFrame(frame, 103).ok, true);
  const d = decodeBinaryWorkerFrame(frame, 102);
  assert.equal(d.ok, false);
  if (!d.ok) assert.equal(d.error.kind, "frameTooLarge");
});

Deno.test("issue 18 only 1..255 printable ASCII characters fit the header's request id", () => {
  assert.equal(
    binaryChunkIdFits("req-0b6c1d2e-aaaa-bbbb-cccc-0123456789ab"),
    true,
  );
  assert.equal(binaryChunkIdFits(""), false);
  assert.equal(binaryChunkIdFits("x".repeat(255)), true);
  assert.equal(binaryChunkIdFits("x".repeat(256)), false);
  assert.equal(binaryChunkIdFits("r\u00e9"), false);
});

Deno.test("issue 31 frames of one stream, then of another, then with a bad id of the same length, each read as if alone", () => {
  const ids = ["req-aaaa", "req-aaaa", "req-aaab", "req-aaaa"];
  for (const id of ids) {
    const frame = encodeBinaryChunkFrame(id, text("x"));
    const d = decodeBinaryWorkerFrame(frame, 1024);
    assert.ok(d.ok);
    assert.equal(d.message.requestId, id);
    // The frame's buffer may be reused by its socket: the id kept is not a view of it.
    frame.fill(0x41, 2, 2 + id.length);
    const again = decodeBinaryWorkerFrame(frame, 1024);
    assert.ok(again.ok);
    assert.equal(again.message.requestId, "A".repeat(id.length));
  }
  const bad = encodeBinaryChunkFrame("AAAAAAAA", text("x"));
  bad[5] = 0x07;
  const d = decodeBinaryWorkerFrame(bad, 1024);
  assert.equal(d.ok, false);
});
