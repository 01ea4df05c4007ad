// chunk-bytes-v1 (issue 18): the one binary frame of the protocol, a streamed
// chunk carried without JSON escaping. Only a worker and a server that both
// listed the extension use it; everything else stays JSON text (C41).
//
//   byte 0        frame kind: 0x01 = a streamed chunk (other values reserved,
//                 refused: the format can grow by kind)
//   byte 1        n, the request id's length in bytes (1..255)
//   bytes 2..2+n  the request id, printable ASCII (our server's ids are)
//   the rest      the chunk: the backend's bytes, whole UTF-8 characters
//
// Pure functions over Uint8Array: no JSON, and the payload is never decoded;
// the decoder hands out a subarray of the frame, not a copy.

/** The frame-kind byte of a streamed chunk. */
export const BINARY_CHUNK_KIND = 0x01;
/** Kind byte + id length byte. */
const HEADER_FIXED = 2;
const ID_BYTES_MAX = 255;

export type BinaryChunk = { requestId: string; chunk: Uint8Array };

export type BinaryDecodeError = {
  kind: "frameTooLarge" | "badBinaryFrame";
  message: string;
};

export type DecodedBinary =
  | { ok: true; message: BinaryChunk }
  | { ok: false; error: BinaryDecodeError };

function bad(message: string): DecodedBinary {
  return { ok: false, error: { kind: "badBinaryFrame", message } };
}

/**
 * Reads a binary frame from a worker. `maxBytes` bounds the whole frame (the
 * server's frame limit, counted in bytes for a binary frame).
 */
export function decodeBinaryWorkerFrame(
  frame: Uint8Array,
  maxBytes: number,
): DecodedBinary {
  if (frame.length > maxBytes) {
    return {
      ok: false,
      error: {
        kind: "frameTooLarge",
        message:
          `binary frame of ${frame.length} bytes exceeds the ${maxBytes} limit`,
      },
    };
  }
  if (frame.length < HEADER_FIXED) {
    return bad("binary frame shorter than its header");
  }
  const kind = frame[0]!;
  if (kind !== BINARY_CHUNK_KIND) {
    return bad(`unknown binary frame kind ${kind}`);
  }
  const n = frame[1]!;
  if (n === 0) return bad("binary chunk frame with an empty request id");
  const start = HEADER_FIXED + n;
  if (frame.length < start) {
    return bad("binary chunk frame shorter than its request id");
  }
  const requestId = sameIdAsLast(frame, start) ? lastId : readId(frame, start);
  if (requestId === null) {
    return bad("binary chunk frame request id is not printable ASCII");
  }
  return { ok: true, message: { requestId, chunk: frame.subarray(start) } };
}

/**
 * The last request id read, and its bytes: a stream's chunks follow each
 * other, and comparing an id's bytes with the last one's (already checked)
 * costs a fraction of checking and building it again, which every Map lookup
 * would then hash again (issue 31). It only ever answers a string equal to the
 * frame's bytes, so nothing a caller sees depends on it.
 */
let lastId = "";
let lastIdBytes = new Uint8Array(0);

function sameIdAsLast(frame: Uint8Array, start: number): boolean {
  const n = start - HEADER_FIXED;
  if (lastIdBytes.length !== n) return false;
  for (let i = 0; i < n; i++) {
    if (lastIdBytes[i] !== frame[HEADER_FIXED + i]) return false;
  }
  return true;
}

/** The id at frame[2..start) if it is printable ASCII (then kept as the last), else null. */
function readId(frame: Uint8Array, start: number): string | null {
  for (let i = HEADER_FIXED; i < start; i++) {
    const b = frame[i]!;
    if (b < 0x20 || b > 0x7e) return null;
  }
  const bytes = frame.slice(HEADER_FIXED, start);
  // One call for the whole id, not a string per character.
  lastId = String.fromCharCode.apply(null, bytes as unknown as number[]);
  lastIdBytes = bytes;
  return lastId;
}

/** Whether `requestId` fits the header (1..255 printable ASCII characters). */
export function binaryChunkIdFits(requestId: string): boolean {
  const n = requestId.length;
  if (n === 0 || n > ID_BYTES_MAX) return false;
  for (let i = 0; i < n; i++) {
    const c = requestId.charCodeAt(i);
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

/** Bytes of the frame carrying `chunkLength` bytes for `requestId`. */
export function binaryChunkFrameLength(
  requestId: string,
  chunkLength: number,
): number {
  return HEADER_FIXED + requestId.length + chunkLength;
}

/**
 * Writes the frame into `target` (binaryChunkFrameLength bytes), so the shell
 * may hand in a buffer of its own (Buffer.allocUnsafe): one allocation for
 * header and payload. The id must fit (binaryChunkIdFits).
 */
export function writeBinaryChunkFrame(
  target: Uint8Array,
  requestId: string,
  chunk: Uint8Array,
): Uint8Array {
  const n = requestId.length;
  target[0] = BINARY_CHUNK_KIND;
  target[1] = n;
  for (let i = 0; i < n; i++) {
    target[HEADER_FIXED + i] = requestId.charCodeAt(i);
  }
  target.set(chunk, HEADER_FIXED + n);
  return target;
}

/** The frame in a new Uint8Array (the simulator's and the tests' encoder). */
export function encodeBinaryChunkFrame(
  requestId: string,
  chunk: Uint8Array,
): Uint8Array {
  return writeBinaryChunkFrame(
    new Uint8Array(binaryChunkFrameLength(requestId, chunk.length)),
    requestId,
    chunk,
  );
}

const UTF8 = new TextDecoder();

/**
 * Text of a chunk: a string as it is, bytes decoded as UTF-8 (an invalid
 * sequence becomes U+FFFD). Off the hot path only: a bytes chunk for a
 * non-streaming answer (a hostile or future worker), a simulator check.
 */
export function chunkAsText(chunk: string | Uint8Array): string {
  return typeof chunk === "string" ? chunk : UTF8.decode(chunk);
}

/**
 * Text of a non-streaming answer given as pieces and a rest (a `respond`
 * effect's `bodyPieces` and `body`, issue 24): byte pieces are decoded across
 * piece boundaries, so a character split between two pieces stays whole. Off
 * the hot path only: simulator checks, tests.
 */
export function piecesAsText(
  pieces: readonly (string | Uint8Array)[],
  rest: string,
): string {
  const decoder = new TextDecoder();
  let out = "";
  for (const p of pieces) {
    out += typeof p === "string"
      ? decoder.decode() + p
      : decoder.decode(p, { stream: true });
  }
  return out + decoder.decode() + rest;
}
