// The frame codec alone: what it parses, how it splits, what it refuses.
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import fc from "fast-check";
import {
  applyMask,
  closePayload,
  encodeFrame,
  makeFrameParser,
  OP_BINARY,
  OP_CLOSE,
  OP_CONTINUATION,
  OP_PING,
  OP_PONG,
  OP_TEXT,
  type Received,
} from "./frame.ts";

const text = (s: string) => new TextEncoder().encode(s);
const KEY = 0x12345678;

/** Everything a parser emits for `chunks`, fed one by one. */
function parseAll(
  chunks: Uint8Array[],
  opts: { masked: boolean; maxPayload?: number } = { masked: true },
): Received[] {
  const p = makeFrameParser({
    masked: opts.masked,
    maxPayload: opts.maxPayload ?? 1 << 20,
  });
  const out: Received[] = [];
  for (const c of chunks) p.parse(c, (m) => out.push(m));
  return out;
}

const concat = (...parts: Uint8Array[]): Uint8Array => Buffer.concat(parts);

/** A frame with FIN and opcode as given (encodeFrame always sets FIN). */
function frameWith(
  first: number,
  payload: Uint8Array,
  key: number | null = KEY,
): Uint8Array {
  const f = encodeFrame(first & 0x0f, payload, key);
  f[0] = first;
  return f;
}

Deno.test("frames of every length class parse back whole, masked and not, fed whole or a byte at a time", () => {
  for (const length of [0, 1, 125, 126, 127, 65535, 65536, 70000]) {
    const payload = new Uint8Array(length).map((_, i) => i * 7);
    for (const key of [KEY, null]) {
      const frame = encodeFrame(OP_BINARY, payload, key);
      const whole = parseAll([frame.slice()], { masked: key !== null });
      assert.deepEqual(whole, [{ kind: "binary", bytes: payload }]);
      if (length > 300) continue;
      const bytes = [...frame].map((b) => new Uint8Array([b]));
      assert.deepEqual(
        parseAll(bytes, { masked: key !== null }),
        [{ kind: "binary", bytes: payload }],
      );
    }
  }
});

Deno.test("any split of a stream of frames yields the same messages", () => {
  fc.assert(
    fc.property(
      fc.array(fc.oneof(fc.string(), fc.uint8Array({ maxLength: 300 })), {
        minLength: 1,
        maxLength: 8,
      }),
      fc.array(fc.nat(), { maxLength: 6 }),
      (messages, cuts) => {
        const frames = messages.map((m) =>
          typeof m === "string"
            ? encodeFrame(OP_TEXT, text(m), KEY)
            : encodeFrame(OP_BINARY, m, KEY)
        );
        const stream = concat(...frames);
        const at = [...new Set(cuts.map((c) => c % (stream.length + 1)))]
          .sort((a, b) => a - b);
        const chunks: Uint8Array[] = [];
        let from = 0;
        for (const c of [...at, stream.length]) {
          chunks.push(stream.slice(from, c));
          from = c;
        }
        const got = parseAll(chunks);
        assert.deepEqual(
          got,
          messages.map((m) =>
            typeof m === "string"
              ? { kind: "text", text: m }
              : { kind: "binary", bytes: m }
          ),
        );
      },
    ),
  );
});

Deno.test("a fragmented message is reassembled, with a ping and a pong between its pieces", () => {
  const got = parseAll([
    frameWith(OP_TEXT, text("hel")),
    frameWith(0x80 | OP_PING, text("p")),
    frameWith(OP_CONTINUATION, text("lo ")),
    frameWith(0x80 | OP_PONG, new Uint8Array(0)),
    frameWith(0x80 | OP_CONTINUATION, text("wörld")),
  ]);
  assert.deepEqual(got, [
    { kind: "ping", payload: text("p") },
    { kind: "pong" },
    { kind: "text", text: "hello wörld" },
  ]);
});

Deno.test("a character split across fragments is whole in the message", () => {
  const bytes = text("é");
  const got = parseAll([
    frameWith(OP_TEXT, bytes.subarray(0, 1)),
    frameWith(0x80 | OP_CONTINUATION, bytes.subarray(1)),
  ]);
  assert.deepEqual(got, [{ kind: "text", text: "é" }]);
});

Deno.test("close frames carry their code and reason; none is 1005", () => {
  assert.deepEqual(
    parseAll([encodeFrame(OP_CLOSE, closePayload(4001, "bye ✓"), KEY)]),
    [{ kind: "close", code: 4001, reason: "bye ✓" }],
  );
  assert.deepEqual(
    parseAll([encodeFrame(OP_CLOSE, new Uint8Array(0), KEY)]),
    [{ kind: "close", code: 1005, reason: "" }],
  );
});

/** The one failure `bytes` makes, as [code, reason]. */
function failure(
  bytes: Uint8Array[],
  opts: { masked: boolean; maxPayload?: number } = { masked: true },
): [number, string] | null {
  const got = parseAll(bytes, opts);
  const last = got.at(-1);
  return last?.kind === "fail" ? [last.code, last.reason] : null;
}

Deno.test("protocol errors fail with 1002 and stop the parser", () => {
  const cases: [Uint8Array[], RegExp, boolean?][] = [
    [[frameWith(0x80 | 0x40 | OP_TEXT, text("x"))], /reserved/],
    [[encodeFrame(OP_TEXT, text("x"), null)], /unmasked/],
    [[encodeFrame(OP_TEXT, text("x"), KEY)], /masked/, false],
    [[frameWith(0x80 | 0x3, text("x"))], /opcode 3/],
    [[frameWith(0x80 | 0xb, text("x"))], /opcode 11/],
    [[frameWith(OP_PING, text("x"))], /fragmented control/],
    [[encodeFrame(OP_PING, new Uint8Array(126), KEY)], /control too long/],
    [[frameWith(0x80 | OP_CONTINUATION, text("x"))], /continuation/],
    [
      [frameWith(OP_TEXT, text("a")), frameWith(0x80 | OP_TEXT, text("b"))],
      /inside a fragmented/,
    ],
    [[encodeFrame(OP_CLOSE, new Uint8Array([3]), KEY)], /one-byte/],
    [[encodeFrame(OP_CLOSE, closePayload(1005, ""), KEY)], /close code 1005/],
    [[encodeFrame(OP_CLOSE, closePayload(2000, ""), KEY)], /close code 2000/],
  ];
  for (const [bytes, reason, masked] of cases) {
    const f = failure(bytes, { masked: masked ?? true });
    assert.ok(f !== null, `no failure for ${reason}`);
    assert.equal(f[0], 1002, String(reason));
    assert.match(f[1], reason);
  }
  // Nothing is parsed after a failure.
  const p = makeFrameParser({ masked: true, maxPayload: 100 });
  const out: Received[] = [];
  p.parse(encodeFrame(OP_TEXT, text("x"), null), (m) => out.push(m));
  p.parse(encodeFrame(OP_TEXT, text("y"), KEY), (m) => out.push(m));
  assert.equal(out.length, 1);
});

Deno.test("text that is not UTF-8 fails with 1007, in a message or a close reason", () => {
  const bad = new Uint8Array([0x61, 0xff, 0x62]);
  assert.deepEqual(failure([encodeFrame(OP_TEXT, bad, KEY)]), [
    1007,
    "invalid UTF-8",
  ]);
  const close = concat(new Uint8Array([0x03, 0xe8]), bad);
  assert.deepEqual(failure([encodeFrame(OP_CLOSE, close, KEY)]), [
    1007,
    "invalid UTF-8",
  ]);
  // A real U+FFFD is text like any other.
  assert.deepEqual(parseAll([encodeFrame(OP_TEXT, text("a\uFFFDb"), KEY)]), [
    { kind: "text", text: "a\uFFFDb" },
  ]);
  // A binary message is bytes: no check.
  assert.deepEqual(parseAll([encodeFrame(OP_BINARY, bad, KEY)]), [
    { kind: "binary", bytes: bad },
  ]);
});

Deno.test("a message over maxPayload fails with 1009 as soon as its header says so, fragments counted together", () => {
  const limit = { masked: true, maxPayload: 10 };
  assert.deepEqual(
    parseAll([encodeFrame(OP_TEXT, text("0123456789"), KEY)], limit),
    [
      { kind: "text", text: "0123456789" },
    ],
  );
  // Only the header of an 11-byte frame: refused before its payload comes.
  const big = encodeFrame(OP_BINARY, new Uint8Array(11), KEY);
  assert.deepEqual(failure([big.subarray(0, 6)], limit), [
    1009,
    "message too large",
  ]);
  assert.deepEqual(
    failure([
      frameWith(OP_TEXT, text("012345")),
      frameWith(0x80 | OP_CONTINUATION, text("6789a")),
    ], limit),
    [1009, "message too large"],
  );
  // A 64-bit length beyond 2^53.
  const huge = new Uint8Array([0x82, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0]);
  assert.deepEqual(failure([huge]), [1009, "message too large"]);
});

Deno.test("a frame that declares a huge length and sends little holds only what came", () => {
  const p = makeFrameParser({ masked: true, maxPayload: 64 * 1024 * 1024 });
  const head = encodeFrame(OP_BINARY, new Uint8Array(0), KEY);
  // Rewritten to declare 32 MiB (64-bit length form), payload never sent.
  const claim = new Uint8Array([0x82, 0x80 | 127, 0, 0, 0, 0, 2, 0, 0, 0]);
  const out: Received[] = [];
  p.parse(
    concat(claim, head.subarray(2, 6), new Uint8Array(100)),
    (m) => out.push(m),
  );
  assert.equal(out.length, 0);
  const memory = Deno.memoryUsage().heapTotal + Deno.memoryUsage().external;
  p.parse(new Uint8Array(100), (m) => out.push(m));
  const after = Deno.memoryUsage().heapTotal + Deno.memoryUsage().external;
  assert.ok(after - memory < 16 * 1024 * 1024, `grew ${after - memory}`);
});

Deno.test("masking by words equals masking byte by byte, at every alignment and phase", () => {
  const bytewise = (data: Uint8Array, key: number, phase: number) => {
    const out = data.slice();
    for (let i = 0; i < out.length; i++) {
      out[i]! ^= (key >>> (((i + phase) & 3) * 8)) & 0xff;
    }
    return out;
  };
  const backing = new Uint8Array(200).map((_, i) => i * 31);
  for (let offset = 0; offset < 4; offset++) {
    for (let phase = 0; phase < 4; phase++) {
      for (const length of [0, 3, 31, 32, 33, 100, 150]) {
        const data = backing.slice().subarray(offset, offset + length);
        const want = bytewise(data, 0xa1b2c3d4, phase);
        applyMask(data, 0xa1b2c3d4, phase);
        assert.deepEqual(data, want, `offset ${offset} phase ${phase}`);
      }
    }
  }
});

Deno.test("a close reason is cut to fit a control frame, never inside a character", () => {
  const p = closePayload(1000, "é".repeat(100));
  assert.ok(p.length <= 125);
  assert.equal(p.length, 124); // 2 code bytes + 61 whole 2-byte characters
  assert.deepEqual(
    parseAll([encodeFrame(OP_CLOSE, p, KEY)]),
    [{ kind: "close", code: 1000, reason: "é".repeat(61) }],
  );
});
