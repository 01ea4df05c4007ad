// The client door's HTTP/1.1 request parser (issue 31): bytes in as the socket
// reads them, split anywhere; out come the request head, the body's bytes
// (de-chunked) and the end of the message. Its rules are llhttp's strict ones,
// which node:http applied here before (the door's tests pin them):
//
// - request line `METHOD SP target SP HTTP/1.0|1.1`, a method node knows,
//   CRLF line ends only (a bare LF or CR is an error), empty lines before a
//   request line skipped;
// - header names are tokens, no space before the colon, values of visible
//   characters, tabs, spaces and obs-text, no folded lines;
// - the head (request line and headers) at most 16 KiB, node's default;
// - framing: `transfer-encoding` whose last coding is `chunked` (extensions
//   and trailers read and dropped), else `content-length` (digits, once), else
//   no body. Both at once, a repeated or non-numeric length, a
//   transfer-encoding not ending in `chunked`: errors, never a guess (a guess
//   is how requests are smuggled past a proxy).
import { addHeaderLine, type HeaderMap } from "../../http1/header_lines.ts";
import {
  CHUNK_SIZE_LINE,
  headEnd,
  isFieldValue,
  isToken,
  latin1,
  TOKEN,
  trimOws,
} from "../../http1/syntax.ts";

/** node's default `maxHeaderSize`: a larger head is answered 431. */
export const HEAD_BYTES_MAX = 16 * 1024;

/** Header names (lowercased) to values, repeated ones joined as node:http joins them. */
export type RequestHeaders = Record<string, string>;

export type RequestHead = {
  method: string;
  /** The request target as sent (node's `req.url`). */
  target: string;
  /** HTTP/1.0 (else 1.1). */
  http10: boolean;
  headers: RequestHeaders;
  /** The client's wish: 1.1 unless `connection: close`, 1.0 only with `connection: keep-alive`. */
  keepAlive: boolean;
  /** `connection: upgrade` with an `upgrade` header: the bytes after the head are not HTTP. */
  upgrade: boolean;
  /** `expect` on an HTTP/1.1 request: 100-continue, or one we cannot meet (417). */
  expect: "none" | "continue" | "other";
  body: "none" | "length" | "chunked";
  /** The body's length when `body` is "length". */
  length: number;
};

/** Why a request could not be read: its head was too large, or it was not HTTP/1.1. */
export type ParseFailure = "headTooLarge" | "malformed";

export class RequestParseError extends Error {
  constructor(readonly failure: ParseFailure, readonly start: string) {
    super(`unparsable HTTP request (${failure})`);
  }
}

type Stage =
  | "head"
  | "length"
  | "chunkSize"
  | "chunkData"
  | "chunkEnd"
  | "trailers"
  | "done";

export type RequestParser = {
  stage: Stage;
  /** Head text (latin1) read so far, or a chunk-size/trailer line begun in an earlier read. */
  text: string;
  /** Body bytes left in the current length or chunk. */
  left: number;
  /** Trailer bytes so far, held to the head's limit. */
  trailerBytes: number;
};

export type ParseEvents = {
  head(head: RequestHead): void;
  body(bytes: Uint8Array): void;
  complete(): void;
};

export function newRequestParser(): RequestParser {
  return { stage: "head", text: "", left: 0, trailerBytes: 0 };
}

/** Ready for the next request on the same connection. */
export function resetParser(p: RequestParser): void {
  p.stage = "head";
  p.text = "";
  p.left = 0;
  p.trailerBytes = 0;
}

/** Whether nothing of a request has been read (between requests). */
export function isIdle(p: RequestParser): boolean {
  return p.stage === "head" && p.text === "";
}

/**
 * Parses `bytes[from..]`; returns where it stopped: at the end of the input,
 * just after a head (the caller hands the request on, then feeds the rest),
 * or just after a complete request (the caller decides when to read the
 * next). Throws RequestParseError on malformed input.
 */
export function feed(
  p: RequestParser,
  bytes: Uint8Array,
  from: number,
  events: ParseEvents,
): number {
  let at = from;
  const end = bytes.length;
  while (at < end) {
    switch (p.stage) {
      case "head": {
        const head = takeHead(p, bytes, at);
        at = head.at;
        if (head.text === null) return at;
        const parsed = parseHead(head.text);
        p.stage = parsed.body === "chunked"
          ? "chunkSize"
          : parsed.body === "length"
          ? "length"
          : "done";
        p.left = parsed.length;
        events.head(parsed);
        // The caller hands the request on before its body is read (and an
        // upgrade's bytes are not HTTP): a bodiless request completes first.
        if (p.stage === "done" && !parsed.upgrade) events.complete();
        return at;
      }
      case "length":
      case "chunkData": {
        const take = Math.min(p.left, end - at);
        const slice = bytes.subarray(at, at + take);
        at += take;
        p.left -= take;
        if (p.left === 0) p.stage = p.stage === "length" ? "done" : "chunkEnd";
        events.body(slice);
        break;
      }
      case "chunkEnd": {
        // The CRLF after a chunk's data; `left` counts its bytes seen.
        if (bytes[at] !== (p.left === 0 ? CR : LF)) malformed(p.text);
        at++;
        if (++p.left === 2) {
          p.left = 0;
          p.stage = "chunkSize";
        }
        break;
      }
      case "chunkSize":
      case "trailers": {
        const line = takeLine(p, bytes, at);
        at = line.at;
        if (line.text === null) break;
        if (p.stage === "chunkSize") onChunkSize(p, line.text);
        else onTrailer(p, line.text);
        break;
      }
      case "done":
        return at;
    }
    if (p.stage === "done") {
      events.complete();
      return at;
    }
  }
  return at;
}

const CR = 13;
const LF = 10;
const COLON = 58;

function isOws(c: number): boolean {
  return c === 32 || c === 9;
}

/** Leading CRLFs, then the head up to its empty line: the text without the final CRLFCRLF, or null (read more). */
function takeHead(
  p: RequestParser,
  bytes: Uint8Array,
  from: number,
): { at: number; text: string | null } {
  const before = p.text.length;
  const stop = Math.min(bytes.length, from + HEAD_BYTES_MAX + 4 - before);
  if (before === 0 && bytes[from] !== CR) {
    // The common case, a whole head in one read: only the head becomes text.
    const end = headEnd(bytes, from, stop);
    if (end >= 0) {
      if (end - from > HEAD_BYTES_MAX) {
        throw headTooLarge(latin1(bytes, from, from + 256));
      }
      return { at: end, text: latin1(bytes, from, end - 4) };
    }
  }
  const text = before === 0
    ? latin1(bytes, from, stop)
    : p.text + latin1(bytes, from, stop);
  // RFC 9112 2.2: empty lines before a request line are ignored.
  let lead = 0;
  while (text.startsWith("\r\n", lead)) lead += 2;
  const found = text.indexOf("\r\n\r\n", Math.max(lead, before - 3));
  if (found < 0) {
    const rest = lead === 0 ? text : text.slice(lead);
    if (rest.length > HEAD_BYTES_MAX) throw headTooLarge(rest);
    checkPartialHead(rest);
    p.text = rest;
    return { at: stop, text: null };
  }
  if (found + 4 - lead > HEAD_BYTES_MAX) throw headTooLarge(text.slice(lead));
  p.text = "";
  return { at: from + found + 4 - before, text: text.slice(lead, found) };
}

/**
 * A head not yet complete is refused at its first wrong byte, as llhttp does:
 * a client sending garbage gets its 400 now, not after 16 KiB or a timeout.
 */
function checkPartialHead(text: string): void {
  const lf = text.indexOf("\n");
  const firstLine = lf < 0 ? text : text.slice(0, lf + 1);
  if (!REQUEST_LINE_START.test(firstLine)) malformed(text);
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) {
    if (i === 0 || text.charCodeAt(i - 1) !== CR) malformed(text);
  }
  // A CR must be followed by LF (the last character may be a CR still waiting).
  const cr = text.length < 2 ? -1 : text.lastIndexOf("\r", text.length - 2);
  if (cr >= 0 && text.charCodeAt(cr + 1) !== LF) malformed(text);
}

/** A line ending in CRLF (chunk sizes, trailers): its text, or null (read more). */
function takeLine(
  p: RequestParser,
  bytes: Uint8Array,
  from: number,
): { at: number; text: string | null } {
  let lf = -1;
  for (let i = from; i < bytes.length; i++) {
    if (bytes[i] === LF) {
      lf = i;
      break;
    }
  }
  const stop = lf < 0 ? bytes.length : lf + 1;
  const line = p.text + latin1(bytes, from, stop);
  if (line.length > HEAD_BYTES_MAX) {
    if (p.stage === "trailers") throw headTooLarge(line);
    malformed(line);
  }
  if (lf < 0) {
    p.text = line;
    return { at: stop, text: null };
  }
  p.text = "";
  if (line.length < 2 || line.charCodeAt(line.length - 2) !== CR) {
    malformed(line);
  }
  return { at: stop, text: line.slice(0, -2) };
}

function onChunkSize(p: RequestParser, text: string): void {
  const m = CHUNK_SIZE_LINE.exec(text);
  if (m === null || m[1]!.length > 13) malformed(text); // 13 hex digits < 2^53
  const size = parseInt(m[1]!, 16);
  if (size === 0) p.stage = "trailers";
  else {
    p.stage = "chunkData";
    p.left = size;
  }
}

/** Trailers are checked like header lines and dropped (nothing here reads them). */
function onTrailer(p: RequestParser, text: string): void {
  if (text === "") {
    p.stage = "done";
    return;
  }
  p.trailerBytes += text.length + 2;
  if (p.trailerBytes > HEAD_BYTES_MAX) throw headTooLarge(text);
  const colon = text.indexOf(":");
  if (colon < 0 || !isToken(text.slice(0, colon))) malformed(text);
  if (!isFieldValue(trimOws(text.slice(colon + 1)))) malformed(text);
}

/** The methods llhttp knows (node's `http.METHODS`): any other is a 400. */
const METHODS = new Set([
  "ACL",
  "BIND",
  "CHECKOUT",
  "CONNECT",
  "COPY",
  "DELETE",
  "GET",
  "HEAD",
  "LINK",
  "LOCK",
  "M-SEARCH",
  "MERGE",
  "MKACTIVITY",
  "MKCALENDAR",
  "MKCOL",
  "MOVE",
  "NOTIFY",
  "OPTIONS",
  "PATCH",
  "POST",
  "PROPFIND",
  "PROPPATCH",
  "PURGE",
  "PUT",
  "QUERY",
  "REBIND",
  "REPORT",
  "SEARCH",
  "SOURCE",
  "SUBSCRIBE",
  "TRACE",
  "UNBIND",
  "UNLINK",
  "UNLOCK",
  "UNSUBSCRIBE",
]);

/** A request line: method, one space, a target of visible characters (and obs-text), one space, the version. */
const REQUEST_LINE = /^([A-Z-]+) ([\x21-\x7e\x80-\xff]+) HTTP\/1\.([01])$/;

/** What a request line may begin with, before its CRLF (or with it). */
const REQUEST_LINE_START =
  /^\r$|^[A-Z-]{0,20}(?: [\x21-\x7e\x80-\xff]*(?: (?:H(?:T(?:T(?:P(?:\/(?:1(?:\.(?:[01](?:\r\n?)?)?)?)?)?)?)?)?)?)?)?$/;

/**
 * A header name's characters (RFC 9110 tchar), by char code: 1 a token
 * character, 2 an uppercase letter (a token character the name's lowercase
 * form changes), 0 anything else. Codes past 255 are never token characters.
 */
const NAME_CHAR = (() => {
  const t = new Uint8Array(256);
  for (let c = 0; c < 256; c++) t[c] = TOKEN[c]!;
  for (let c = 0x41; c <= 0x5a; c++) t[c] = 2;
  return t;
})();

/**
 * The head's text (request line and header lines, CRLF-separated, no final
 * empty line) as a request. One pass over the text by char code (issue 31: a
 * `split` into lines, then a slice, token test, trim and value test per line
 * were ~4 µs for an SDK's 15 headers): a name is read up to its colon and
 * must be all token characters (no space before the colon, no folded line,
 * no bare CR or LF), a value is what follows up to the line's CRLF, without
 * optional whitespace at either end, and must be field-value characters.
 */
export function parseHead(text: string): RequestHead {
  const lineEnd = text.indexOf("\r\n");
  const m = REQUEST_LINE.exec(lineEnd < 0 ? text : text.slice(0, lineEnd));
  if (m === null || !METHODS.has(m[1]!)) malformed(text);
  const http10 = m[3] === "0";
  const headers: RequestHeaders = {};
  let length = -1;
  let transferEncoding: string | null = null;
  let close = false;
  let keepAlive = false;
  let upgradeToken = false;
  let expect: string | null = null;
  const end = text.length;
  let at = lineEnd < 0 ? end : lineEnd + 2;
  // A CRLF ends every line but the last: one at the text's very end is an
  // empty header line after it.
  if (lineEnd >= 0 && at === end) malformed(text);
  while (at < end) {
    // The name: token characters up to the colon.
    const nameAt = at;
    let upper = false;
    let c = text.charCodeAt(at);
    while (c !== COLON) {
      const kind = c < 256 ? NAME_CHAR[c]! : 0;
      if (kind === 0) malformed(text);
      if (kind === 2) upper = true;
      if (++at === end) malformed(text);
      c = text.charCodeAt(at);
    }
    if (at === nameAt) malformed(text);
    const raw = text.slice(nameAt, at);
    const lower = upper ? raw.toLowerCase() : raw;
    // The value: up to CRLF (or the head's end), trimmed of spaces and tabs.
    at++;
    while (at < end && isOws(text.charCodeAt(at))) at++;
    const valueAt = at;
    let valueEnd = end;
    for (; at < end; at++) {
      c = text.charCodeAt(at);
      if (c === CR) {
        if (text.charCodeAt(at + 1) !== LF) malformed(text);
        valueEnd = at;
        at += 2;
        break;
      }
      if (c !== 9 && (c < 0x20 || c === 0x7f)) malformed(text);
    }
    if (valueEnd !== end && at === end) malformed(text);
    while (valueEnd > valueAt && isOws(text.charCodeAt(valueEnd - 1))) {
      valueEnd--;
    }
    const value = text.slice(valueAt, valueEnd);
    switch (lower) {
      case "content-length":
        if (length >= 0 || !/^\d{1,15}$/.test(value)) malformed(text);
        length = Number(value);
        break;
      case "transfer-encoding":
        transferEncoding = transferEncoding === null
          ? value
          : `${transferEncoding}, ${value}`;
        break;
      case "connection":
        for (const token of value.split(",")) {
          const t = trimOws(token).toLowerCase();
          if (t === "close") close = true;
          else if (t === "keep-alive") keepAlive = true;
          else if (t === "upgrade") upgradeToken = true;
        }
        break;
      case "expect":
        expect = value;
        break;
    }
    if (lower === "set-cookie") {
      // Joined like any list: a request's Set-Cookie means nothing here, and
      // every request header stays one string.
      const had = headers[lower];
      headers[lower] = had === undefined ? value : `${had}, ${value}`;
    } else addHeaderLine(headers as HeaderMap, lower, value);
  }
  let body: RequestHead["body"] = length > 0 ? "length" : "none";
  if (transferEncoding !== null) {
    if (length >= 0) malformed(text);
    const codings = transferEncoding.split(",").map((c) =>
      trimOws(c).toLowerCase()
    );
    // chunked must be the last coding, and only once (RFC 9112 6.1).
    if (
      codings[codings.length - 1] !== "chunked" ||
      codings.indexOf("chunked") !== codings.length - 1
    ) malformed(text);
    body = "chunked";
  }
  return {
    method: m[1]!,
    target: m[2]!,
    http10,
    headers,
    keepAlive: http10 ? keepAlive && !close : !close,
    upgrade: upgradeToken && headers["upgrade"] !== undefined,
    expect: expect === null || http10
      ? "none"
      : expect.toLowerCase() === "100-continue"
      ? "continue"
      : "other",
    body,
    length: length > 0 ? length : 0,
  };
}

function malformed(text: string): never {
  throw new RequestParseError("malformed", text.slice(0, 256));
}

function headTooLarge(text: string): RequestParseError {
  return new RequestParseError("headTooLarge", text.slice(0, 256));
}
