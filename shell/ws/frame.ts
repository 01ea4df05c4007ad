// WebSocket frames (RFC 6455 section 5), as a pure incremental codec: bytes in,
// whole messages out; headers written into a buffer the caller owns. No I/O
// here: connection.ts moves the bytes. Issue 31: our own implementation
// replaces the `ws` package on every link, because `ws` spent 16 µs of CPU a
// message echoed and Deno's WebSocket has no TCP_NODELAY (bench/README.md).
//
// No extension is ever negotiated (no permessage-deflate), so any reserved bit
// is a protocol error. What a peer gets wrong closes as the RFC says: 1002 for
// a protocol error, 1007 for text that is not UTF-8, 1009 for a message over
// the limit.

export const OP_CONTINUATION = 0x0;
export const OP_TEXT = 0x1;
export const OP_BINARY = 0x2;
export const OP_CLOSE = 0x8;
export const OP_PING = 0x9;
export const OP_PONG = 0xa;

/** Close codes this codec sends (RFC 6455 section 7.4.1). */
export const CLOSE_NORMAL = 1000;
export const CLOSE_PROTOCOL_ERROR = 1002;
/** Received when the peer's close frame had no code; never sent. */
export const CLOSE_NO_CODE = 1005;
/** Reported when the socket ended without a close frame; never sent. */
export const CLOSE_ABNORMAL = 1006;
export const CLOSE_INVALID_DATA = 1007;
export const CLOSE_TOO_LARGE = 1009;

/** A control frame's payload limit (RFC 6455 section 5.5). */
export const CONTROL_PAYLOAD_MAX = 125;

/** What the parser found: a whole message, a control frame, or a violation. */
export type Received =
  | { kind: "text"; text: string }
  | { kind: "binary"; bytes: Uint8Array }
  | { kind: "ping"; payload: Uint8Array }
  | { kind: "pong" }
  | { kind: "close"; code: number; reason: string }
  /** The peer broke the protocol: close with `code`; the parser reads no more. */
  | { kind: "fail"; code: number; reason: string };

export type FrameParser = {
  /**
   * Parses every whole frame in `bytes` and emits what they hold, in order;
   * keeps an unfinished frame for the next call. `bytes` may be unmasked in
   * place, and is not kept: the caller may reuse it once this returns.
   */
  parse(bytes: Uint8Array, emit: (m: Received) => void): void;
  /** Largest message (all its fragments) taken; larger fails with 1009. May change at any time. */
  maxPayload: number;
  /** Parses nothing more (the connection ended). */
  stop(): void;
};

const strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const lenient = new TextDecoder("utf-8", { ignoreBOM: true });
const EMPTY = new Uint8Array(0);
/** Unfinished-frame buffers at most this big are kept for reuse. */
const KEEP_BYTES_MAX = 4 * 1024;

/**
 * An incremental parser. `masked`: frames must be masked (we are the server,
 * the peer a client) or must not be (we are the client).
 */
export function makeFrameParser(
  opts: { masked: boolean; maxPayload: number },
): FrameParser {
  return new Parser(opts.masked, opts.maxPayload);
}

/** A class for one object per connection, its methods shared (connection.ts says why). */
class Parser implements FrameParser {
  maxPayload: number;
  readonly #masked: boolean;
  /** Bytes of an unfinished frame (and whatever came after it). */
  #pend: Uint8Array = EMPTY;
  #pendLen = 0;
  /** Bytes the unfinished frame needs in all, once its header is known. */
  #need = 0;
  /** The unfinished frame's payload length when it is a data frame, else 0. */
  #needData = 0;
  #stopped = false;
  /** The opcode of a fragmented message in progress, 0 when none. */
  #fragOp = 0;
  #frags: Uint8Array[] = [];
  #fragLen = 0;

  constructor(masked: boolean, maxPayload: number) {
    this.#masked = masked;
    this.maxPayload = maxPayload;
  }

  stop(): void {
    this.#stopped = true;
    this.#pend = EMPTY;
    this.#pendLen = 0;
    this.#frags = [];
  }

  parse(bytes: Uint8Array, emit: (m: Received) => void): void {
    if (this.#stopped) return;
    if (this.#pendLen === 0) {
      const used = this.#take(bytes, bytes.length, emit);
      if (!this.#stopped && used < bytes.length) {
        this.#keep(bytes.subarray(used));
      }
      return;
    }
    // maxPayload may have dropped since the header came (a connection that
    // closes takes nothing big): the unfinished frame is not kept for it.
    if (this.#fragLen + this.#needData > this.maxPayload) {
      return this.#fail(emit, CLOSE_TOO_LARGE, "message too large");
    }
    this.#append(bytes);
    if (this.#pendLen < this.#need) return;
    const used = this.#take(this.#pend, this.#pendLen, emit);
    if (this.#stopped) return;
    this.#pend.copyWithin(0, used, this.#pendLen);
    this.#pendLen -= used;
    // Kept for the next unfinished frame only while small.
    if (this.#pendLen === 0 && this.#pend.length > KEEP_BYTES_MAX) {
      this.#pend = EMPTY;
    }
  }

  #keep(rest: Uint8Array): void {
    // Grown as bytes come, never to the size a header claims: a peer that
    // declares a huge frame and sends little gets little memory.
    if (this.#pend.length < rest.length) {
      this.#pend = new Uint8Array(Math.max(rest.length, 4096));
    }
    this.#pend.set(rest);
    this.#pendLen = rest.length;
  }

  #append(bytes: Uint8Array): void {
    const want = this.#pendLen + bytes.length;
    if (want > this.#pend.length) {
      const bigger = new Uint8Array(Math.max(want, this.#pend.length * 2));
      bigger.set(this.#pend.subarray(0, this.#pendLen));
      this.#pend = bigger;
    }
    this.#pend.set(bytes, this.#pendLen);
    this.#pendLen = want;
  }

  #fail(emit: (m: Received) => void, code: number, reason: string): void {
    this.stop();
    emit({ kind: "fail", code, reason });
  }

  /** Parses whole frames from buf[0, end); returns the bytes used. */
  #take(buf: Uint8Array, end: number, emit: (m: Received) => void): number {
    let at = 0;
    while (!this.#stopped && end - at >= 2) {
      const b0 = buf[at]!;
      const b1 = buf[at + 1]!;
      let len = b1 & 0x7f;
      let head = 2;
      if (len === 126) {
        if (end - at < 4) break;
        len = (buf[at + 2]! << 8) | buf[at + 3]!;
        head = 4;
      } else if (len === 127) {
        if (end - at < 10) break;
        const high = readU32(buf, at + 2);
        // Beyond 2^53 - 1 is beyond any limit we take.
        if (high > 0x1fffff) {
          this.#fail(emit, CLOSE_TOO_LARGE, "message too large");
          break;
        }
        len = high * 0x100000000 + readU32(buf, at + 6);
        head = 10;
      }
      const violation = this.#headerViolation(b0, b1, len);
      if (violation !== null) {
        this.#fail(emit, violation.code, violation.reason);
        break;
      }
      const masked = (b1 & 0x80) !== 0;
      if (masked) head += 4;
      const total = head + len;
      if (end - at < total) {
        this.#need = total;
        this.#needData = (b0 & 0x08) === 0 ? len : 0;
        break;
      }
      this.#need = 0;
      this.#needData = 0;
      const payload = buf.subarray(at + head, at + total);
      if (masked) applyMask(payload, readMaskKey(buf, at + head - 4), 0);
      at += total;
      this.#frame(b0, payload, emit);
    }
    return at;
  }

  /** What is wrong with a frame's header, or null. */
  #headerViolation(
    b0: number,
    b1: number,
    len: number,
  ): { code: number; reason: string } | null {
    const op = b0 & 0x0f;
    const fin = (b0 & 0x80) !== 0;
    if ((b0 & 0x70) !== 0) return protocolError("reserved bits set");
    if (((b1 & 0x80) !== 0) !== this.#masked) {
      return protocolError(this.#masked ? "unmasked frame" : "masked frame");
    }
    if (op >= 0x8) {
      if (op !== OP_CLOSE && op !== OP_PING && op !== OP_PONG) {
        return protocolError(`unknown opcode ${op}`);
      }
      if (!fin) return protocolError("fragmented control frame");
      if (len > CONTROL_PAYLOAD_MAX) return protocolError("control too long");
      return null;
    }
    if (op !== OP_CONTINUATION && op !== OP_TEXT && op !== OP_BINARY) {
      return protocolError(`unknown opcode ${op}`);
    }
    if (op === OP_CONTINUATION && this.#fragOp === 0) {
      return protocolError("continuation without a message");
    }
    if (op !== OP_CONTINUATION && this.#fragOp !== 0) {
      return protocolError("new message inside a fragmented one");
    }
    if (this.#fragLen + len > this.maxPayload) {
      return { code: CLOSE_TOO_LARGE, reason: "message too large" };
    }
    return null;
  }

  /** One whole, unmasked frame. */
  #frame(b0: number, payload: Uint8Array, emit: (m: Received) => void): void {
    const op = b0 & 0x0f;
    const fin = (b0 & 0x80) !== 0;
    switch (op) {
      case OP_CLOSE:
        return this.#closeFrame(payload, emit);
      case OP_PING:
        return emit({ kind: "ping", payload: copyOf(payload) });
      case OP_PONG:
        return emit({ kind: "pong" });
      case OP_CONTINUATION: {
        this.#frags.push(copyOf(payload));
        this.#fragLen += payload.length;
        if (!fin) return;
        const whole = concat(this.#frags, this.#fragLen);
        const wholeOp = this.#fragOp;
        this.#fragOp = 0;
        this.#frags = [];
        this.#fragLen = 0;
        return this.#message(wholeOp, whole, emit);
      }
      default:
        if (fin) return this.#message(op, payload, emit);
        this.#fragOp = op;
        this.#frags = [copyOf(payload)];
        this.#fragLen = payload.length;
    }
  }

  #message(op: number, payload: Uint8Array, emit: (m: Received) => void) {
    if (op === OP_BINARY) {
      // The caller reuses its buffer: a binary message gets its own bytes.
      return emit({ kind: "binary", bytes: copyOf(payload) });
    }
    const text = decodeUtf8(payload);
    if (text === null) {
      return this.#fail(emit, CLOSE_INVALID_DATA, "invalid UTF-8");
    }
    emit({ kind: "text", text });
  }

  #closeFrame(payload: Uint8Array, emit: (m: Received) => void): void {
    if (payload.length === 0) {
      return emit({ kind: "close", code: CLOSE_NO_CODE, reason: "" });
    }
    if (payload.length === 1) {
      return this.#fail(emit, CLOSE_PROTOCOL_ERROR, "one-byte close frame");
    }
    const code = (payload[0]! << 8) | payload[1]!;
    if (!closeCodeValid(code)) {
      return this.#fail(
        emit,
        CLOSE_PROTOCOL_ERROR,
        `invalid close code ${code}`,
      );
    }
    const reason = decodeUtf8(payload.subarray(2));
    if (reason === null) {
      return this.#fail(emit, CLOSE_INVALID_DATA, "invalid UTF-8");
    }
    emit({ kind: "close", code, reason });
  }
}

/**
 * A copy of `bytes` as a plain Uint8Array: the caller may hand in a node
 * Buffer, whose `slice` is a view, not a copy (and whose copies are Buffers).
 */
function copyOf(bytes: Uint8Array): Uint8Array {
  if (bytes.constructor === Uint8Array) return bytes.slice();
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length).slice();
}

function protocolError(reason: string): { code: number; reason: string } {
  return { code: CLOSE_PROTOCOL_ERROR, reason };
}

/**
 * The text of UTF-8 `bytes`, or null when they are not UTF-8. The lenient
 * decoder is 3x faster than the fatal one on short texts (measured: 0.22 µs
 * against 0.76 for a 50-byte chunk frame); only a text holding U+FFFD (a
 * replaced byte, or a real U+FFFD) is decoded again strictly.
 */
function decodeUtf8(bytes: Uint8Array): string | null {
  const text = lenient.decode(bytes);
  if (!text.includes("\uFFFD")) return text;
  try {
    return strict.decode(bytes);
  } catch {
    return null;
  }
}

function concat(parts: Uint8Array[], length: number): Uint8Array {
  const out = new Uint8Array(length);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function readU32(buf: Uint8Array, at: number): number {
  return ((buf[at]! << 24) | (buf[at + 1]! << 16) | (buf[at + 2]! << 8) |
    buf[at + 3]!) >>> 0;
}

/** The 4 mask bytes at `at`, as applyMask takes them (byte i of the key in bits 8i..8i+7). */
export function readMaskKey(buf: Uint8Array, at: number): number {
  return (buf[at]! | (buf[at + 1]! << 8) | (buf[at + 2]! << 16) |
    (buf[at + 3]! << 24)) >>> 0;
}

/** Codes a close frame may carry (RFC 6455 section 7.4; 1012-1014 as registered since). */
export function closeCodeValid(code: number): boolean {
  return (code >= 1000 && code <= 1014 && code !== 1004 && code !== 1005 &&
    code !== 1006) || (code >= 3000 && code <= 4999);
}

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
/** Below this many bytes, masking byte by byte is cheaper than making a word view. */
const WORDS_FROM = 32;

/**
 * XORs `data` with the mask `key` (readMaskKey's layout), in place: masking
 * and unmasking are the same. `phase` is the key byte data[0] takes (the
 * payload index of data[0], modulo 4).
 */
export function applyMask(data: Uint8Array, key: number, phase: number): void {
  const n = data.length;
  if (key === 0 || n === 0) return;
  let i = 0;
  if (n >= WORDS_FROM && LITTLE_ENDIAN) {
    // Bytes up to a 4-aligned address one by one, then whole words.
    const lead = (4 - ((data.byteOffset) & 3)) & 3;
    for (; i < lead; i++) {
      data[i]! ^= (key >>> (((i + phase) & 3) * 8)) & 0xff;
    }
    const words = (n - lead) >>> 2;
    const shift = ((lead + phase) & 3) * 8;
    const wordKey = shift === 0
      ? key
      : ((key >>> shift) | (key << (32 - shift))) >>> 0;
    const view = new Uint32Array(data.buffer, data.byteOffset + lead, words);
    for (let w = 0; w < words; w++) view[w]! ^= wordKey;
    i = lead + words * 4;
  }
  for (; i < n; i++) data[i]! ^= (key >>> (((i + phase) & 3) * 8)) & 0xff;
}

/** Header bytes for a frame of `length` payload bytes. */
export function headerLength(length: number, masked: boolean): number {
  const base = length < 126 ? 2 : length < 65536 ? 4 : 10;
  return masked ? base + 4 : base;
}

/**
 * Writes a final frame's header at buf[at]; returns its length. `maskKey`
 * null for an unmasked frame (we are the server); the caller masks the
 * payload with the same key.
 */
export function writeHeader(
  buf: Uint8Array,
  at: number,
  op: number,
  length: number,
  maskKey: number | null,
): number {
  const maskBit = maskKey === null ? 0 : 0x80;
  buf[at] = 0x80 | op;
  let i = at + 2;
  if (length < 126) buf[at + 1] = maskBit | length;
  else if (length < 65536) {
    buf[at + 1] = maskBit | 126;
    buf[at + 2] = length >>> 8;
    buf[at + 3] = length & 0xff;
    i = at + 4;
  } else {
    buf[at + 1] = maskBit | 127;
    const high = Math.floor(length / 0x100000000);
    writeU32(buf, at + 2, high);
    writeU32(buf, at + 6, length >>> 0);
    i = at + 10;
  }
  if (maskKey !== null) {
    buf[i] = maskKey & 0xff;
    buf[i + 1] = (maskKey >>> 8) & 0xff;
    buf[i + 2] = (maskKey >>> 16) & 0xff;
    buf[i + 3] = maskKey >>> 24;
    i += 4;
  }
  return i - at;
}

function writeU32(buf: Uint8Array, at: number, v: number): void {
  buf[at] = v >>> 24;
  buf[at + 1] = (v >>> 16) & 0xff;
  buf[at + 2] = (v >>> 8) & 0xff;
  buf[at + 3] = v & 0xff;
}

/** One whole frame in one allocation (tests, and what is sent once: a refusal's close). */
export function encodeFrame(
  op: number,
  payload: Uint8Array,
  maskKey: number | null,
): Uint8Array {
  const head = headerLength(payload.length, maskKey !== null);
  const out = new Uint8Array(head + payload.length);
  writeHeader(out, 0, op, payload.length, maskKey);
  out.set(payload, head);
  if (maskKey !== null) applyMask(out.subarray(head), maskKey, 0);
  return out;
}

/** A close frame's payload: the code, then the reason cut to fit 125 bytes. */
export function closePayload(code: number, reason: string): Uint8Array {
  const out = new Uint8Array(CONTROL_PAYLOAD_MAX);
  out[0] = code >>> 8;
  out[1] = code & 0xff;
  const { written } = new TextEncoder().encodeInto(reason, out.subarray(2));
  return out.subarray(0, 2 + (written ?? 0));
}
