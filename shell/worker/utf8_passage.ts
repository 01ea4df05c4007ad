// chunk-bytes-v1 (issue 18, C45): a stream's backend bytes passed on as bytes,
// with the client seeing exactly what the text path (a streaming UTF-8 decoder,
// then UTF-8 again on the server) would have given it:
//
// - a character split across reads is held back (at most 3 bytes) and sent
//   with the next read, so no frame ends inside a character;
// - the rest is checked with node:buffer's native `isUtf8` and, when valid,
//   passed on untouched (the common case: no decode, no copy);
// - invalid input switches the stream to the text path's own decoder
//   (StringDecoder, U+FFFD replacement) for the rest of it, re-encoded: the
//   same bytes the text path delivers. The switch is exact because everything
//   before was valid and the held bytes are what that decoder would hold.
import { isUtf8 } from "node:buffer";
import { StringDecoder } from "node:string_decoder";

const EMPTY = Buffer.alloc(0);

/**
 * How many bytes at the end of `b` begin a character that is not complete yet
 * (0..3): a lead byte and the continuation bytes it still needs more of, its
 * second byte in the range that lead allows. 0 when the end is complete or is
 * no valid prefix at all (then `isUtf8` decides).
 */
export function incompleteTail(b: Uint8Array): number {
  const n = b.length;
  for (let k = 1; k <= 3 && k <= n; k++) {
    const c = b[n - k]!;
    if ((c & 0xc0) === 0x80) continue; // a continuation byte: look further back
    const need = c >= 0xc2 && c <= 0xdf
      ? 2
      : c >= 0xe0 && c <= 0xef
      ? 3
      : c >= 0xf0 && c <= 0xf4
      ? 4
      : 1; // ASCII or a byte no character starts with
    if (need <= k) return 0;
    if (k >= 2 && !secondByteFits(c, b[n - k + 1]!)) return 0;
    return k;
  }
  return 0;
}

/** The second byte's range for leads that narrow it (no overlongs, surrogates, > U+10FFFF). */
function secondByteFits(lead: number, second: number): boolean {
  switch (lead) {
    case 0xe0:
      return second >= 0xa0;
    case 0xed:
      return second <= 0x9f;
    case 0xf0:
      return second >= 0x90;
    case 0xf4:
      return second <= 0x8f;
    default:
      return true;
  }
}

export type Utf8Passage = {
  /** The bytes to send for this read (possibly empty: all held back). */
  pass(bytes: Buffer): Buffer;
  /** What is left at the end of the stream: U+FFFD for a cut character, as the text path ends. */
  end(): Buffer;
};

export function newUtf8Passage(): Utf8Passage {
  let carry: Buffer = EMPTY;
  /** Set once the stream held invalid UTF-8: from then on, the text path's decoder. */
  let decoder: StringDecoder | null = null;
  return {
    pass(bytes) {
      if (decoder !== null) return Buffer.from(decoder.write(bytes), "utf8");
      const all = carry.length === 0 ? bytes : Buffer.concat([carry, bytes]);
      const k = incompleteTail(all);
      const whole = k === 0 ? all : all.subarray(0, all.length - k);
      if (isUtf8(whole)) {
        carry = k === 0 ? EMPTY : Buffer.from(all.subarray(all.length - k));
        return whole;
      }
      carry = EMPTY;
      decoder = new StringDecoder("utf8");
      return Buffer.from(decoder.write(all), "utf8");
    },
    end() {
      if (decoder !== null) return Buffer.from(decoder.end(), "utf8");
      if (carry.length === 0) return EMPTY;
      const d = new StringDecoder("utf8");
      const text = d.write(carry) + d.end();
      carry = EMPTY;
      return Buffer.from(text, "utf8");
    },
  };
}
