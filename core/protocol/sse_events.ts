// Server-sent event boundaries (issue 24.1, C60). A stream that breaks must
// break between two events: the relay's error event then starts a fresh event
// instead of being glued onto half of one, which every SDK reads as corrupt
// JSON. An event ends at a blank line; lines end with LF, CRLF or CR (the SSE
// spec), so a stream is "on a boundary" when it ends with two line ends in a
// row. Pure functions over text or bytes: the worker's readers hold back the
// part after the last boundary (newSseEventPassage), the server's effect runner
// checks only whether what it forwarded ended on one (endsOnEventBoundary).

const LF = 10;
const CR = 13;

/** A chunk as it crosses the relay: text, or bytes (chunk-bytes-v1). */
/**
 * Whether an answer is server-sent events (a `text/event-stream` content type):
 * its reads pass on whole events at a time (C60), and it needs no head of its
 * own (stream-head-v1). Anything else (NDJSON, plain text, audio) has no events
 * to keep whole.
 */
export function isEventStream(contentType: string | undefined): boolean {
  return contentType !== undefined &&
    contentType.trimStart().toLowerCase().startsWith("text/event-stream");
}

export type SseChunk = string | Uint8Array;

function codeAt(chunk: SseChunk, i: number): number {
  return typeof chunk === "string" ? chunk.charCodeAt(i) : chunk[i]!;
}

/**
 * Where the last complete event of `chunk` ends (the index just past its blank
 * line), scanning back from the end no further than `from`; -1 if none ends at
 * or after `from`. Bytes before `from` may be looked at as context (the line
 * end before a blank line). A trailing CR counts as a line end: an SSE parser
 * dispatches on it, and an LF that follows is part of the same line end.
 */
export function lastEventEnd(chunk: SseChunk, from = 0): number {
  for (let i = chunk.length - 1; i >= from; i--) {
    const c = codeAt(chunk, i);
    if (c !== LF && c !== CR) continue;
    // The line end that ends at i starts at s (CRLF is one line end).
    const s = c === LF && i > 0 && codeAt(chunk, i - 1) === CR ? i - 1 : i;
    const p = s - 1;
    if (p < 0) continue; // a line end at the very start: no line before it here
    const before = codeAt(chunk, p);
    if (before === LF || before === CR) return i + 1;
  }
  return -1;
}

/**
 * Whether a stream whose last chunk is `chunk` ends between two events. O(1):
 * the last three characters (a non-empty chunk; an empty one changes nothing).
 */
export function endsOnEventBoundary(chunk: SseChunk): boolean {
  const n = chunk.length;
  if (n < 2) return false;
  return lastEventEnd(chunk, n - 1) === n;
}

/** More than this held back for one unfinished event and it is passed on after all. */
export const SSE_HOLD_BYTES_MAX = 1024 * 1024;

/**
 * Holds back the part of a stream after its last complete event, for as long
 * as that part is under SSE_HOLD_BYTES_MAX, so what is passed on always ends on
 * an event boundary; the held part goes out with the next read, at the normal
 * end (`end`), or nowhere when the stream breaks (it is simply not asked for).
 * Text and bytes are not mixed within one passage.
 */
export type SseEventPassage<T extends SseChunk> = {
  /** What to send for this read (possibly empty: all held back). */
  pass(chunk: T): T;
  /** The held part, at the stream's normal end (possibly empty). */
  end(): T;
  /** How much is held. */
  held(): number;
};

function join<T extends SseChunk>(a: T, b: T): T {
  if (typeof a === "string") return (a + (b as string)) as T;
  const x = a as Uint8Array;
  const y = b as Uint8Array;
  const out = new Uint8Array(x.length + y.length);
  out.set(x, 0);
  out.set(y, x.length);
  return out as T;
}

function cut<T extends SseChunk>(c: T, start: number, end: number): T {
  return (typeof c === "string"
    ? c.slice(start, end)
    : (c as Uint8Array).subarray(start, end)) as T;
}

/** A passage for one stream; `empty` is its type's empty chunk ("" or a 0-byte array). */
export function newSseEventPassage<T extends SseChunk>(
  empty: T,
): SseEventPassage<T> {
  let carry: T = empty;
  return {
    pass(chunk) {
      if (carry.length === 0 && endsOnEventBoundary(chunk)) return chunk;
      const all = carry.length === 0 ? chunk : join(carry, chunk);
      // Only the new part can hold a boundary the carry did not (plus the one
      // line end before it that the carry may end with).
      const end = lastEventEnd(all, Math.max(0, carry.length - 1));
      if (end < 0 && all.length <= SSE_HOLD_BYTES_MAX) {
        carry = typeof all === "string" ? all : copy(all);
        return empty;
      }
      if (end < 0 || all.length - end > SSE_HOLD_BYTES_MAX) {
        carry = empty; // too large to hold: passed on whole
        return all;
      }
      carry = end === all.length ? empty : keep(cut(all, end, all.length));
      return cut(all, 0, end);
    },
    end() {
      const rest = carry;
      carry = empty;
      return rest;
    },
    held: () => carry.length,
  };
}

/**
 * Held bytes are copied (the read's buffer may be reused by its reader), with
 * Uint8Array's own slice: node's Buffer#slice is a view, not a copy.
 */
function copy<T extends SseChunk>(c: T): T {
  return (typeof c === "string"
    ? c
    : Uint8Array.prototype.slice.call(c as Uint8Array)) as T;
}

const keep = copy;
