// The largest frame either side of the protocol sends or takes: 16 MiB, the
// original server's (its WebSocket library's default, counted in bytes) and
// our server's default (counted in characters, `frameCharsMax`). Written once:
// the server's default (core/config.ts), the worker core's frame room
// (core/worker/worker_state.ts) and the worker shell's buffered-answer bound
// (shell/worker/answer_readers.ts) all read it.
export const PROTOCOL_FRAME_MAX = 16 * 1024 * 1024;

/**
 * Room kept in every response_complete frame for the fields around the body
 * and headers (type, status, token counts, the JSON punctuation).
 */
export const FRAME_ENVELOPE_BYTES = 1024;

/**
 * The UTF-8 length of a string, as a WebSocket text frame carries it: a
 * surrogate pair is 4 bytes, a lone surrogate 3 (it would go out as U+FFFD,
 * as node's `Buffer.byteLength` counts it). Counted, not encoded, so a 16 MiB
 * body is not copied to be measured.
 */
export function utf8Bytes(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

/**
 * The bytes a response_complete frame of `frameBytesMax` leaves for its body,
 * once the envelope, the headers' JSON and the request id are counted.
 */
export function frameRoomBytes(
  headers: Record<string, string>,
  requestId: string,
  frameBytesMax: number,
): number {
  return frameBytesMax - FRAME_ENVELOPE_BYTES -
    utf8Bytes(JSON.stringify(headers)) - utf8Bytes(requestId);
}

/**
 * At least utf8Bytes(JSON.stringify(headers)), from lengths alone: 6 bytes a
 * UTF-16 unit at most, the quotes, colon and comma of each entry, the braces.
 */
function headersBytesBound(headers: Record<string, string>): number {
  let n = 2;
  for (const name in headers) {
    n += (name.length + headers[name]!.length) * 6 + 6;
  }
  return n;
}

/**
 * The one frame-fit rule (issue 27): whether a response_complete carrying
 * `body` (as a JSON string) fits one frame. In bytes, because a frame is
 * measured in bytes on the wire: the original server's limit is its WebSocket
 * library's, in bytes, and a frame within N bytes is within N characters too
 * (a UTF-16 unit is never less than one UTF-8 byte), so it also fits our
 * server's `frameCharsMax`. The worker core (core/worker/answers.ts) and the
 * worker shell (shell/worker/answer_readers.ts) both ask this.
 */
export function bodyFitsOneFrame(
  body: string,
  headers: Record<string, string>,
  requestId: string,
  frameBytesMax: number,
): boolean {
  // Cheap bounds first: JSON takes at most 6 bytes per UTF-16 unit
  // (`\uXXXX`; a pair's 4 bytes are 2 units), plus the two quotes. From
  // lengths alone, nothing stringified: what nearly every answer needs
  // (issue 31: the exact room was ~1.5 µs of the worker's plain request).
  const bound = FRAME_ENVELOPE_BYTES + headersBytesBound(headers) +
    requestId.length * 3 + body.length * 6 + 2;
  if (bound <= frameBytesMax) return true;
  const room = frameRoomBytes(headers, requestId, frameBytesMax);
  if (body.length * 6 + 2 <= room) return true;
  return utf8Bytes(JSON.stringify(body)) <= room;
}
