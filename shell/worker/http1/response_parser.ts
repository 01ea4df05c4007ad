// An incremental HTTP/1.1 response parser for the worker's backend client
// (issue 18): bytes in as the socket reads them, split anywhere; out come the
// response head, body slices (views into the input, never copied) and the end
// of the message. Its rules are llhttp's strict ones, the parser node:http uses
// (the differential test, response_parser_diff_test.ts, holds it to them):
//
// - status line `HTTP/<d>.<d> <3 digits>[ <reason>]`, CRLF line ends only;
// - header names are tokens, no space before the colon, values of visible
//   characters, tabs, spaces and obs-text, no folded lines;
// - 1xx interim responses (except 101) are skipped, the next head read;
// - no body for a HEAD request and for 1xx, 204 and 304;
// - `transfer-encoding` ending in `chunked`: chunked (extensions, trailers);
//   any other transfer-encoding: read until close; `content-length` with
//   `transfer-encoding`, a repeated or non-numeric `content-length`: errors;
// - neither: the body runs until the backend closes (`finish`).
import { addHeaderLine, type HeaderMap } from "../../http1/header_lines.ts";
import {
  CHUNK_SIZE_LINE,
  isFieldValue,
  isToken,
  trimOws,
} from "../../http1/syntax.ts";

/** A parsed final response head. */
export type ResponseHead = {
  status: number;
  headers: HeaderMap;
  /** Whether the connection may carry another request afterwards (llhttp's should_keep_alive). */
  keepAlive: boolean;
};

/** What the parser reports, in order: head, body slices, end. */
export type ParserEvents = {
  head(head: ResponseHead): void;
  body(bytes: Buffer): void;
  /** The message is complete; `rest` is how many input bytes follow it. */
  complete(rest: number): void;
};

/** The `code` of a malformed-response error (node's are HPE_…, llhttp's codes). */
export const PARSE_ERROR = "HPE_INVALID";

/** Whether `e` is this parser's error (a malformed response), not a callback's. */
export function isParseError(e: unknown): e is Error {
  return e instanceof Error && (e as { code?: unknown }).code === PARSE_ERROR;
}

/** Where the parser is in the message. */
type Stage =
  /** Reading the status line and header lines, up to the empty line. */
  | { kind: "head" }
  | { kind: "length"; left: number }
  /** Reading a chunk-size line (with extensions). */
  | { kind: "chunkSize" }
  | { kind: "chunkData"; left: number }
  /** The CRLF after a chunk's data; `seen` of its 2 bytes read. */
  | { kind: "chunkEnd"; seen: number }
  /** Trailer lines after the last chunk, up to the empty line. */
  | { kind: "trailers" }
  /** No length given: everything until the backend closes is body. */
  | { kind: "untilClose" }
  | { kind: "done" }
  | { kind: "failed" };

export type ResponseParser = {
  stage: Stage;
  /** A line begun in an earlier read (latin1), for head, chunk-size and trailer lines. */
  line: string;
  /** Head lines so far: the status line first. */
  headLines: string[];
  /** Bytes of the current head, against HEAD_BYTES_MAX. */
  headBytes: number;
  /** No body whatever the headers say (the request was HEAD). */
  noBody: boolean;
  /** The final head, once read. */
  head: ResponseHead | null;
  /** This read's gathered chunk data (feed): from, to. */
  gatheredFrom: number;
  gatheredTo: number;
};

/** node's default `maxHeaderSize` (16 KiB): a larger head is an error. */
const HEAD_BYTES_MAX = 16 * 1024;
/** Chunk sizes above this are refused rather than lose precision. */
const CHUNK_SIZE_MAX = Number.MAX_SAFE_INTEGER;

const CR = 13;
const LF = 10;

export function newResponseParser(noBody = false): ResponseParser {
  return {
    stage: { kind: "head" },
    line: "",
    headLines: [],
    headBytes: 0,
    noBody,
    head: null,
    gatheredFrom: 0,
    gatheredTo: 0,
  };
}

/**
 * Parses one read. Throws an error with code PARSE_ERROR on malformed input
 * (the parser is then `failed`); bytes after a complete message are left
 * unread (`complete` says how many).
 */
export function feed(
  p: ResponseParser,
  bytes: Buffer,
  events: ParserEvents,
): void {
  // A chunked body's data of this read is moved together, over the chunk
  // framing between (`bytes` is this read's own), and goes out as one body
  // slice when the read is done, the message complete or the bytes wrong:
  // one slice a read rather than one a chunk, which the readers would only
  // copy together again (issue 31). Where it lies is kept on the parser, not
  // in closures made per read (issue 31, third round).
  p.gatheredFrom = 0;
  p.gatheredTo = 0;
  try {
    read(p, bytes, events);
  } finally {
    passGathered(p, bytes, events);
  }
}

/** Takes `take` bytes of chunk data at `at` into this read's gathered run. */
function gather(p: ResponseParser, bytes: Buffer, at: number, take: number) {
  if (p.gatheredTo === p.gatheredFrom) p.gatheredFrom = p.gatheredTo = at;
  else if (p.gatheredTo !== at) {
    bytes.copyWithin(p.gatheredTo, at, at + take);
  }
  p.gatheredTo += take;
}

/** Passes the gathered chunk data of this read on, if any. */
function passGathered(p: ResponseParser, bytes: Buffer, events: ParserEvents) {
  if (p.gatheredTo === p.gatheredFrom) return;
  const slice = bytes.subarray(p.gatheredFrom, p.gatheredTo);
  p.gatheredFrom = p.gatheredTo;
  events.body(slice);
}

/** feed's loop. */
function read(
  p: ResponseParser,
  bytes: Buffer,
  events: ParserEvents,
): void {
  let at = 0;
  const end = bytes.length;
  while (at < end) {
    const stage = p.stage;
    switch (stage.kind) {
      case "head":
      case "trailers":
      case "chunkSize": {
        if (p.line === "") {
          const next = stage.kind === "chunkSize"
            ? plainChunkSize(p, bytes, at)
            : stage.kind === "head" && p.headLines.length === 0
            ? wholeHead(p, bytes, at, events)
            : -1;
          if (next >= 0) {
            at = next;
            break;
          }
        }
        const lf = indexOfLf(bytes, at);
        const stop = lf < 0 ? end : lf + 1;
        if (stage.kind === "head") {
          p.headBytes += stop - at;
          if (p.headBytes > HEAD_BYTES_MAX) fail(p, "Header overflow");
        } else if (p.line.length + stop - at > HEAD_BYTES_MAX) {
          fail(
            p,
            stage.kind === "trailers"
              ? "Header overflow"
              : "Invalid character in chunk size",
          );
        }
        p.line += latin1(bytes, at, stop);
        at = stop;
        if (lf < 0) {
          // llhttp refuses a bad status line at its first wrong byte, before
          // the line ends: bytes after a message are judged by it (exchange.ts).
          if (stage.kind === "head" && p.headLines.length === 0) {
            if (!STATUS_LINE_START.test(p.line)) fail(p, "Invalid status line");
          }
          // So is a CR followed by anything but LF (a line that would fail
          // when it ends anyway): a backend that then keeps the connection
          // open gets its protocol error now, not a hang-up later (C61).
          const cr = p.line.indexOf("\r");
          if (cr >= 0 && cr < p.line.length - 1) {
            fail(
              p,
              stage.kind === "trailers"
                ? "Expected LF after headers" // llhttp's words here
                : "Missing expected LF after CR",
            );
          }
          break;
        }
        const line = p.line;
        p.line = "";
        // Empty lines before a status line are skipped, bare LF too (llhttp).
        if (
          stage.kind === "head" && p.headLines.length === 0 &&
          (line === "\n" || line === "\r\n")
        ) {
          p.headBytes = 0;
          continue;
        }
        if (line.length < 2 || line.charCodeAt(line.length - 2) !== CR) {
          fail(p, "Missing expected CR after line");
        }
        const text = line.slice(0, -2);
        if (stage.kind === "head") onHeadLine(p, text, events);
        else if (stage.kind === "trailers") onTrailerLine(p, text);
        else onChunkSizeLine(p, text);
        break;
      }
      case "length": {
        const take = Math.min(stage.left, end - at);
        const slice = bytes.subarray(at, at + take);
        at += take;
        stage.left -= take;
        if (stage.left === 0) p.stage = { kind: "done" };
        events.body(slice);
        break;
      }
      case "chunkData": {
        const take = Math.min(stage.left, end - at);
        gather(p, bytes, at, take);
        at += take;
        stage.left -= take;
        if (stage.left === 0) {
          // The chunk's CRLF in this read too: straight to the next size.
          if (bytes[at] === CR && bytes[at + 1] === LF) {
            at += 2;
            p.stage = { kind: "chunkSize" };
          } else p.stage = { kind: "chunkEnd", seen: 0 };
        }
        break;
      }
      case "chunkEnd": {
        const want = stage.seen === 0 ? CR : LF;
        if (bytes[at] !== want) {
          fail(p, "Expected LF after chunk data");
        }
        at++;
        if (++stage.seen === 2) p.stage = { kind: "chunkSize" };
        break;
      }
      case "untilClose": {
        const slice = at === 0 ? bytes : bytes.subarray(at);
        at = end;
        events.body(slice);
        break;
      }
      case "done":
        return;
      case "failed":
        return fail(p, "parser failed earlier");
      default:
        return unreachable(stage);
    }
    if (p.stage.kind === "done") {
      passGathered(p, bytes, events);
      return events.complete(end - at);
    }
  }
}

/** Uint8Array's own indexOf: a V8 builtin (Buffer's is Deno's JavaScript). */
function indexOfLf(bytes: Uint8Array, from: number): number {
  return Uint8Array.prototype.indexOf.call(bytes, LF, from);
}

/**
 * A head that arrived whole in this read, every line ending in CRLF, the
 * first not empty, all of it within HEAD_BYTES_MAX: decoded at once and its
 * lines handed to onHeadLine in order, which is what the line-by-line path
 * does with them (the same checks, the same errors at the same line). Returns
 * where the head ends, or -1 (nothing read) for any other head: the line
 * path takes it from the start.
 */
function wholeHead(
  p: ResponseParser,
  bytes: Buffer,
  at: number,
  events: ParserEvents,
): number {
  if (bytes[at] === CR || bytes[at] === LF) return -1;
  let from = at;
  for (;;) {
    const lf = indexOfLf(bytes, from);
    if (lf < 0 || lf - at + 1 > HEAD_BYTES_MAX || bytes[lf - 1] !== CR) {
      return -1;
    }
    if (lf === from + 1) {
      // The empty line: `from` is where it starts.
      const lines = latin1(bytes, at, from - 2).split("\r\n");
      for (let i = 0; i < lines.length; i++) onHeadLine(p, lines[i]!, events);
      onHeadLine(p, "", events);
      return lf + 1;
    }
    from = lf + 1;
  }
}

/** Hex digits a size may have for plainChunkSize: 13 stay below 2^53. */
const PLAIN_SIZE_DIGITS_MAX = 13;

/**
 * A chunk-size line of hex digits alone (no extension), whole in this read:
 * read from the bytes, with no string and no regex (a stream's every event
 * has one). Returns where the line ends, or -1 (nothing read) for any other
 * line: the line path takes it, and decides the same for these.
 */
function plainChunkSize(p: ResponseParser, bytes: Buffer, at: number): number {
  let size = 0;
  let i = at;
  for (; i < bytes.length && i - at < PLAIN_SIZE_DIGITS_MAX; i++) {
    const c = bytes[i]!;
    const digit = c >= 0x30 && c <= 0x39
      ? c - 0x30
      : c >= 0x61 && c <= 0x66
      ? c - 0x57
      : c >= 0x41 && c <= 0x46
      ? c - 0x37
      : -1;
    if (digit < 0) break;
    size = size * 16 + digit;
  }
  if (i === at || bytes[i] !== CR || bytes[i + 1] !== LF) return -1;
  p.stage = size === 0
    ? { kind: "trailers" }
    : { kind: "chunkData", left: size };
  return i + 2;
}

/**
 * The backend closed the connection: the end of a close-delimited body
 * (true: complete), or a message cut short (false).
 */
export function finish(p: ResponseParser, events: ParserEvents): boolean {
  if (p.stage.kind === "untilClose") {
    p.stage = { kind: "done" };
    events.complete(0);
    return true;
  }
  return p.stage.kind === "done";
}

function unreachable(x: never): never {
  throw new Error(`unknown parser stage ${JSON.stringify(x)}`);
}

/** Worded like llhttp's errors as node reports them ("Parse Error: …"). */
function fail(p: ResponseParser, reason: string): never {
  p.stage = { kind: "failed" };
  throw Object.assign(new Error(`Parse Error: ${reason}`), {
    code: PARSE_ERROR,
  });
}

function latin1(bytes: Buffer, from: number, to: number): string {
  // node:buffer's latin1 decoding is native (~10x String.fromCharCode.apply
  // on a subarray, measured on a 5-header head).
  return bytes.toString("latin1", from, to);
}

/**
 * llhttp's strict status line: the versions it knows, a code of 100-999, then
 * a space and any reason (control characters too) or nothing.
 */
const STATUS_LINE = /^HTTP\/(0\.9|1\.0|1\.1|2\.0) ([1-9]\d\d)(?: ([^\r]*))?$/;

/** What a status line may begin with (a lone CR: an empty line's). */
const STATUS_LINE_START = new RegExp(
  "^(?:\\r|H|HT|HTT|HTTP|HTTP/|HTTP/[012]|HTTP/[012]\\." +
    "|HTTP/(?:0\\.9|1\\.[01]|2\\.0)(?: (?:[1-9](?:\\d(?:\\d(?: [^\\r]*\\r?|\\r)?)?)?)?)?)$",
);

function onHeadLine(p: ResponseParser, text: string, events: ParserEvents) {
  if (p.headLines.length === 0) {
    if (STATUS_LINE.test(text)) p.headLines.push(text);
    else fail(p, "Invalid status line");
    return;
  }
  if (text !== "") {
    const c = text.charCodeAt(0);
    if (c === 32 || c === 9) {
      fail(p, "Unexpected whitespace after header value");
    }
    p.headLines.push(text);
    return;
  }
  endOfHead(p, events);
}

/** The empty line: the head is complete, decide how the body is framed. */
function endOfHead(p: ResponseParser, events: ParserEvents) {
  const lines = p.headLines;
  p.headLines = [];
  p.headBytes = 0;
  const m = STATUS_LINE.exec(lines[0]!)!;
  const version = m[1]!;
  const status = Number(m[2]);
  const headers: HeaderMap = {};
  let contentLength: number | null = null;
  let transferEncoding: string | null = null;
  let connectionClose = false;
  let connectionKeepAlive = false;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    if (colon < 0 || !isToken(name)) fail(p, "Invalid header token");
    const value = trimOws(line.slice(colon + 1));
    if (!isFieldValue(value)) fail(p, "Invalid header value char");
    const lower = name.toLowerCase();
    if (lower === "content-length") {
      if (contentLength !== null) fail(p, "Duplicate Content-Length");
      if (!/^\d+$/.test(value)) fail(p, "Invalid character in Content-Length");
      contentLength = Number(value);
      if (!Number.isSafeInteger(contentLength)) {
        fail(p, "Content-Length overflow");
      }
    } else if (lower === "transfer-encoding") {
      transferEncoding = transferEncoding === null
        ? value
        : `${transferEncoding}, ${value}`;
    } else if (lower === "connection") {
      for (const token of value.split(",")) {
        const t = trimOws(token).toLowerCase();
        if (t === "close") connectionClose = true;
        else if (t === "keep-alive") connectionKeepAlive = true;
      }
    }
    addHeaderLine(headers, lower, value);
  }
  const chunked = transferEncoding !== null &&
    /(?:^|,)[ \t]*chunked[ \t]*$/i.test(transferEncoding);
  if (transferEncoding !== null && contentLength !== null) {
    fail(p, "Content-Length can't be present with Transfer-Encoding");
  }
  const interim = status >= 100 && status < 200 && status !== 101;
  if (interim) {
    // 100 Continue and the like: skipped, the real head follows.
    p.stage = { kind: "head" };
    return;
  }
  if (status === 101) fail(p, "Unexpected upgrade");
  const noBody = p.noBody || status === 204 || status === 304;
  const untilClose = !noBody && !chunked &&
    (transferEncoding !== null || contentLength === null);
  const http11 = version === "1.1" || version === "2.0";
  const keepAlive = !untilClose &&
    (http11 ? !connectionClose : connectionKeepAlive);
  p.head = { status, headers, keepAlive };
  p.stage = noBody || contentLength === 0
    ? { kind: "done" }
    : chunked
    ? { kind: "chunkSize" }
    : untilClose
    ? { kind: "untilClose" }
    : { kind: "length", left: contentLength! };
  events.head(p.head);
}

function onChunkSizeLine(p: ResponseParser, text: string) {
  const m = CHUNK_SIZE_LINE.exec(text);
  if (m === null) fail(p, "Invalid character in chunk size");
  const size = parseInt(m[1]!, 16);
  if (size > CHUNK_SIZE_MAX) fail(p, "Chunk size overflow");
  p.stage = size === 0
    ? { kind: "trailers" }
    : { kind: "chunkData", left: size };
}

/** Trailers are checked like header lines and dropped (node keeps them apart, unused here). */
function onTrailerLine(p: ResponseParser, text: string) {
  if (text === "") {
    p.stage = { kind: "done" };
    return;
  }
  const colon = text.indexOf(":");
  if (colon < 0 || !isToken(text.slice(0, colon))) {
    fail(p, "Invalid header token");
  }
  if (!isFieldValue(trimOws(text.slice(colon + 1)))) {
    fail(p, "Invalid header value char");
  }
}
