// Reading a backend's answer, whichever HTTP client fetched it (issue 18: the
// worker's own HTTP/1.1 client for http:, node:https for https:): streaming
// answers pass on read by read (text through a streaming UTF-8 decoder so a
// character split across reads survives, C45; with chunk-bytes-v1 the reads'
// bytes as they are, a split character held back, utf8_passage.ts); everything
// else ends in one response_complete carrying the backend's real status and
// body, sent ahead in pieces when the server negotiated body-chunks-v1 (issue
// 14). Reading pauses while the proxy link is full.
import { StringDecoder } from "node:string_decoder";
import { isUtf8 } from "node:buffer";
import type http from "node:http";
import type { HeaderMap } from "../http1/header_lines.ts";
import {
  answerTooLarge,
  apiError,
  bodyFitsOneFrame,
  errorShapeOf,
  FRAME_ENVELOPE_BYTES,
  passedOnHeaders,
  PROTOCOL_FRAME_MAX,
  type RequestMessage,
  routeErrorBody,
} from "../../core/protocol/mod.ts";
import type { ClientError } from "../../core/vocabulary.ts";
import type { Completion } from "../../core/worker/mod.ts";
import {
  keepTail,
  newUsageByteScan,
  newUsageScan,
  newUsageTail,
  scanBytes,
  scanBytesResult,
  scanChunk,
  scanResult,
  tokenCountsFromBody,
  tokenCountsFromTail,
} from "./usage.ts";
import { newUtf8Passage } from "./utf8_passage.ts";
import { newUsageByteStrip, newUsageStrip } from "./usage_ask.ts";
import { pieceBytes } from "../piece_bytes.ts";
import {
  isEventStream,
  newSseEventPassage,
} from "../../core/protocol/sse_events.ts";

function failure(request: RequestMessage, error: ClientError): Completion {
  return {
    status_code: error.status,
    headers: { "content-type": "application/json" },
    body: routeErrorBody(errorShapeOf(request.endpoint_path), error),
    token_counts: null,
  };
}

/** How one backend call ended. */
export type BackendOutcome =
  | { kind: "completed"; completion: Completion }
  /**
   * No complete answer: refused, reset or cut before any byte went to the
   * proxy (`backend_unavailable`: another worker may run it), or cut after some
   * did (`backend_stream_broken`). The worker core picks the frame.
   */
  | {
    kind: "failed";
    code: "backend_unavailable" | "backend_stream_broken";
    message: string;
  }
  /** `signal` aborted it (a cancel: the caller has already answered it). */
  | { kind: "cancelled" };

/** Where the pieces of an answer go, and whether the link can take more. */
export type AnswerSink = {
  /** One response_chunk: text, or a stream's bytes when `chunkBytes`. */
  chunk(data: string | Uint8Array): void;
  /**
   * A stream's reads leave as bytes (the server negotiated chunk-bytes-v1):
   * no decoding, whole UTF-8 characters per chunk.
   */
  chunkBytes: boolean;
  /**
   * Non-streaming bodies may leave as chunks too (the server negotiated
   * body-chunks-v1); otherwise they are buffered up to RESPONSE_FRAME_BYTES_MAX.
   */
  bodyChunks: boolean;
  /**
   * The server negotiated body-bytes-v1 (issue 25): an answer whose content
   * type is not text keeps its bytes (base64 in response_complete, or a
   * stream's chunks with no UTF-8 repair). Absent = false.
   */
  bodyBytes?: boolean;
  /**
   * A streamed answer's head, before its first chunk (stream-head-v1, issue
   * 25; the worker core decides whether it is sent). Absent = not passed on.
   */
  head?(status: number, headers: Record<string, string>): void;
  /** False while the link to the proxy holds too much unsent: reading pauses. */
  hasRoom(): boolean;
};

/**
 * The largest response_complete frame sent, encoded, in UTF-8 bytes: 16 MiB,
 * the original server's frame limit (its WebSocket library's default) and our
 * server's default frame limit (16 Mi characters). A buffered body whose frame
 * would be larger is answered 502 `response_too_large` instead: an oversized
 * frame costs the whole connection, and a scoped error would rerun the
 * inference elsewhere only to fail the same way.
 */
export const RESPONSE_FRAME_BYTES_MAX = PROTOCOL_FRAME_MAX;

/** With body-chunks-v1, a non-streaming body leaves in pieces of this many characters. */
export const BODY_PIECE_CHARS = 1024 * 1024;

/** How often a paused read looks again whether the link has room. */
const ROOM_POLL_MS = 5;

/**
 * The answer to a backend whose bytes were not HTTP/1.1 (issue 24.5, C61): a
 * 502 the client gets at once. Not `backend_unavailable`: the backend is up
 * and may well have run the inference, so neither another attempt nor the
 * server's unavailability circuit is right for it.
 */
export function protocolErrorAnswer(
  request: RequestMessage,
  message: string,
): Completion {
  return failure(request, apiError("backend_protocol_error", { why: message }));
}

function tooLarge(request: RequestMessage): Completion {
  return failure(
    request,
    answerTooLarge(false, {
      limit: RESPONSE_FRAME_BYTES_MAX,
      unit: "bytes",
      of: "in one worker frame (the proxy did not negotiate body-chunks-v1)",
    }),
  );
}

/** One backend call, as the answer's readers see it. */
export type Call = {
  /** Settles the call (once; later outcomes are ignored). */
  done(outcome: BackendOutcome): void;
  /** No complete answer: unavailable, or broken once started. */
  failed(why: string): void;
  /** The backend's bytes are not HTTP (C61): a 502, or broken once started. */
  invalid(why: string): void;
  settled(): boolean;
  /** Whether any byte of the answer went to the proxy. */
  started(): boolean;
  markStarted(): void;
  /** The response head arrived (BACKEND_HEAD_TIMEOUT_SECS stops counting). */
  headArrived(): void;
  /** Stops the backend call. */
  destroy(): void;
  /**
   * The worker asked this stream for usage (issue 33, usage_ask.ts): the
   * usage-only chunk is read and taken out. Absent = false.
   */
  stripUsage?: boolean;
  /** Sets what to send before a break is reported (a held final event). Absent = nothing. */
  onBreak?(f: () => void): void;
};

/**
 * The backend's answer body as the readers see it, whichever client read it:
 * bytes as they arrive, the end, and a pause for when the proxy link is full.
 */
export type AnswerBody = {
  onData(f: (bytes: Buffer) => void): void;
  onEnd(f: () => void): void;
  pause(): void;
  resume(): void;
  isPaused(): boolean;
};

/**
 * One backend answer being read: what the three readers below share. The call
 * is a field, not spread in (issue 31: its ten members copied per answer).
 */
type Answer = {
  call: Call;
  request: RequestMessage;
  body: AnswerBody;
  status: number;
  /** The backend's response headers, hop-by-hop ones dropped. */
  headers: Record<string, string>;
  /** Passes a piece on to the proxy; reading pauses while the link is full. */
  send(data: string | Uint8Array): void;
};

/** Reads the backend's answer the way its kind needs (see the readers below). */
export function readAnswer(
  status: number,
  headers: http.IncomingHttpHeaders | HeaderMap,
  body: AnswerBody,
  request: RequestMessage,
  sink: AnswerSink,
  call: Call,
): void {
  const ok = status >= 200 && status < 300;
  const answer: Answer = {
    call,
    request,
    body,
    status,
    headers: passedOnHeaders(headers),
    send: (data) => {
      call.markStarted();
      sink.chunk(data);
      pauseWhileFull(body, sink, call.settled);
    },
  };
  // stream-head-v1 (issue 25): a stream's head goes ahead of its chunks.
  if (request.is_streaming && ok) sink.head?.(status, answer.headers);
  // body-bytes-v1 (issue 25): an answer that is not text keeps its bytes.
  if (sink.bodyBytes === true && !isTextType(answer.headers["content-type"])) {
    if (!request.is_streaming) return readWholeBytes(answer);
    if (ok && sink.chunkBytes) return readStreamBytes(answer, true, false);
  }
  const sse = isEventStream(answer.headers["content-type"]);
  // chunk-bytes-v1: a successful stream is read as bytes (readStreamBytes).
  if (request.is_streaming && ok && sink.chunkBytes) {
    return readStreamBytes(answer, false, sse);
  }
  if (!request.is_streaming && ok && sink.bodyChunks) readInPieces(answer);
  // Errors of a streaming request arrive as one JSON body: pass it whole.
  else if (!request.is_streaming || !ok) readWhole(answer, ok);
  else readStream(answer, sse);
}

/**
 * The body as text: a streaming UTF-8 decoder, so a character split across
 * reads survives (C45), as node's `setEncoding("utf8")` decodes (its end too:
 * an unfinished character becomes U+FFFD before the end).
 */
function onText(
  body: AnswerBody,
  onText: (s: string) => void,
  onEnd: () => void,
): void {
  const decoder = new StringDecoder("utf8");
  body.onData((bytes) => onText(decoder.write(bytes)));
  body.onEnd(() => {
    const rest = decoder.end();
    if (rest !== "") onText(rest);
    onEnd();
  });
}

/**
 * onText for an answer that is not streamed: the first read is held as bytes
 * and decoded at the end on its own, the decoder made only when a second read
 * comes (then both go through it, in order). A whole body in one read, the
 * common case, costs one `toString` instead of a decoder, its `write` and its
 * `end` (issue 31): the same text, since one buffer's `toString("utf8")`
 * equals a fresh decoder's `write` then `end` of it (answer_readers_test.ts).
 * A held read reaches `onText` one read later, or at the end: nothing of a
 * buffered answer leaves before its end anyway, and body-chunks-v1's pieces
 * keep their order.
 */
export function onWholeText(
  body: AnswerBody,
  onText: (s: string) => void,
  onEnd: () => void,
): void {
  let held: Buffer | null = null;
  let decoder: StringDecoder | null = null;
  body.onData((bytes) => {
    if (decoder === null) {
      if (held === null) {
        held = bytes;
        return;
      }
      decoder = new StringDecoder("utf8");
      const first = held;
      held = null;
      onText(decoder.write(first));
    }
    onText(decoder.write(bytes));
  });
  body.onEnd(() => {
    if (held !== null) {
      const text = held.toString("utf8");
      held = null;
      if (text !== "") onText(text);
    } else if (decoder !== null) {
      const rest = decoder.end();
      if (rest !== "") onText(rest);
    }
    onEnd();
  });
}

/** Pauses reading until the proxy link has room again. */
function pauseWhileFull(
  body: AnswerBody,
  sink: AnswerSink,
  settled: () => boolean,
): void {
  if (sink.hasRoom() || body.isPaused()) return;
  body.pause();
  const poll = () => {
    if (settled()) return;
    if (sink.hasRoom()) body.resume();
    else setTimeout(poll, ROOM_POLL_MS);
  };
  setTimeout(poll, ROOM_POLL_MS);
}

/** body-chunks-v1: a non-streaming body leaves in pieces as it comes, the rest in response_complete. */
function readInPieces(a: Answer): void {
  let body = "";
  const tail = newUsageTail();
  onWholeText(a.body, (s) => {
    body += s;
    while (body.length >= BODY_PIECE_CHARS) {
      const piece = body.slice(0, BODY_PIECE_CHARS);
      body = body.slice(BODY_PIECE_CHARS);
      keepTail(tail, piece);
      a.send(piece);
    }
  }, () => {
    keepTail(tail, body);
    a.call.done({
      kind: "completed",
      completion: {
        status_code: a.status,
        headers: a.headers,
        body,
        token_counts: a.call.started()
          ? tokenCountsFromTail(tail.text)
          : tokenCountsFromBody(body),
      },
    });
  });
}

/** The whole body buffered for one response_complete, up to one frame. */
function readWhole(a: Answer, ok: boolean): void {
  let body = "";
  let bytes = 0;
  onWholeText(a.body, (s) => {
    bytes += pieceBytes(s);
    if (bytes > RESPONSE_FRAME_BYTES_MAX) {
      // Already too large for one frame: stop reading, answer 502.
      a.call.destroy();
      return a.call.done({
        kind: "completed",
        completion: tooLarge(a.request),
      });
    }
    body += s;
  }, () =>
    a.call.done({
      kind: "completed",
      // The worker core's rule too (core/protocol/frame_limit.ts).
      completion: bodyFitsOneFrame(
          body,
          a.headers,
          a.request.request_id,
          RESPONSE_FRAME_BYTES_MAX,
        )
        ? {
          status_code: a.status,
          headers: a.headers,
          body,
          token_counts: ok ? tokenCountsFromBody(body) : null,
        }
        : tooLarge(a.request),
    }));
}

/**
 * A stream: each socket read's text is passed on, reads of one turn joined (a
 * microtask flush), and scanned for the usage numbers on the way. An SSE
 * stream's unfinished last event is held back until it is whole (C60): a break
 * then drops it, and the server's error event starts a fresh event.
 */
function readStream(a: Answer, sse: boolean): void {
  const usage = newUsageScan();
  const events = sse ? newSseEventPassage<string>("") : null;
  const strip = sse && a.call.stripUsage === true
    ? newUsageStrip((event) => scanChunk(usage, event))
    : null;
  if (strip !== null) a.call.onBreak?.(() => send(strip.end()));
  let pending = "";
  const send = (text: string) => {
    if (text === "") return;
    a.send(text);
    scanChunk(usage, text);
  };
  const pass = (text: string) => send(strip === null ? text : strip.pass(text));
  const flush = () => {
    if (pending === "" || a.call.settled()) return;
    const text = pending;
    pending = "";
    pass(events === null ? text : events.pass(text));
  };
  onText(a.body, (s) => {
    if (s === "") return;
    if (pending === "") queueMicrotask(flush);
    pending += s;
  }, () => {
    flush();
    if (events !== null && !a.call.settled()) pass(events.end());
    if (strip !== null && !a.call.settled()) send(strip.end());
    streamEnded(a, scanResult(usage));
  });
}

/** A stream read to its end: its response_complete carries only status, headers and usage. */
function streamEnded(a: Answer, tokenCounts: Completion["token_counts"]): void {
  a.call.done({
    kind: "completed",
    completion: {
      status_code: a.status,
      headers: a.headers,
      body: "",
      token_counts: tokenCounts,
    },
  });
}

/**
 * readStream for chunk-bytes-v1 (issue 18): each turn's reads leave as one
 * chunk of bytes, never decoded (utf8_passage.ts holds back a split character
 * and keeps invalid input exactly as the text path delivers it, C45), an SSE
 * stream's unfinished last event held back as readStream holds it (C60);
 * `raw` (body-bytes-v1): a binary stream's bytes as they are.
 */
function readStreamBytes(a: Answer, raw: boolean, sse: boolean): void {
  const usage = newUsageByteScan();
  const utf8 = newUtf8Passage();
  const events = sse ? newSseEventPassage<Uint8Array>(EMPTY_BYTES) : null;
  const strip = sse && a.call.stripUsage === true
    ? newUsageByteStrip((event) => scanBytes(usage, Buffer.from(event)))
    : null;
  let pending: Buffer[] = [];
  const sendOut = (out: Buffer) => {
    if (out.length === 0) return;
    a.send(out);
    scanBytes(usage, out);
  };
  const send = (out: Buffer) =>
    sendOut(strip === null || out.length === 0 ? out : strip.pass(out));
  if (strip !== null) a.call.onBreak?.(() => sendOut(strip.end()));
  const pass = (bytes: Buffer) => {
    // raw (body-bytes-v1, a binary answer): the bytes as they are.
    const out = raw ? bytes : utf8.pass(bytes);
    if (out.length === 0) return;
    send(events === null ? out : asBuffer(events.pass(out)));
  };
  const flush = () => {
    if (pending.length === 0 || a.call.settled()) return;
    const reads = pending;
    pending = [];
    pass(reads.length === 1 ? reads[0]! : joined(reads));
  };
  a.body.onData((b) => {
    if (b.length === 0) return;
    if (pending.length === 0) queueMicrotask(flush);
    pending.push(b);
  });
  a.body.onEnd(() => {
    flush();
    if (!a.call.settled() && !raw) {
      const rest = utf8.end();
      if (events === null) send(rest);
      else {
        if (rest.length > 0) send(asBuffer(events.pass(rest)));
        send(asBuffer(events.end()));
      }
      if (strip !== null) sendOut(strip.end());
    }
    streamEnded(a, scanBytesResult(usage));
  });
}

// ---- body-bytes-v1 (issue 25) ------------------------------------------------

/**
 * The last content type isTextType judged, and its answer: a backend sends
 * the same one answer after answer, and its lower-casing, split and trim were
 * three strings and an array per answer (issue 31).
 */
let lastContentType = "";
let lastIsText = true;

/** Whether a content type is text (kept on the text readers); absent counts as text. */
export function isTextType(contentType: string | undefined): boolean {
  if (contentType === undefined) return true;
  if (contentType === lastContentType) return lastIsText;
  lastIsText = judgeTextType(contentType);
  lastContentType = contentType;
  return lastIsText;
}

function judgeTextType(contentType: string): boolean {
  const ct = contentType.toLowerCase().split(";")[0]!.trim();
  return ct === "" || ct.startsWith("text/") || ct.endsWith("+json") ||
    ct.endsWith("+xml") || ct === "application/json" ||
    ct === "application/x-ndjson" || ct === "application/xml" ||
    ct === "application/javascript";
}

/** Base64 grows bytes by 4/3: the most bytes one base64 frame can carry. */
const BINARY_BODY_BYTES_MAX = Math.floor(
  (RESPONSE_FRAME_BYTES_MAX - FRAME_ENVELOPE_BYTES) * 3 / 4,
);

/**
 * A non-streaming answer that is not text, buffered as bytes for one
 * response_complete: as text when its bytes are UTF-8 anyway, else base64.
 */
function readWholeBytes(a: Answer): void {
  const parts: Buffer[] = [];
  let size = 0;
  a.body.onData((b) => {
    if (a.call.settled()) return;
    size += b.length;
    if (size > BINARY_BODY_BYTES_MAX) {
      a.call.destroy();
      return a.call.done({
        kind: "completed",
        completion: tooLarge(a.request),
      });
    }
    parts.push(b);
  });
  a.body.onEnd(() => {
    const bytes = Buffer.concat(parts);
    const text = isUtf8(bytes);
    a.call.done({
      kind: "completed",
      completion: text
        ? {
          status_code: a.status,
          headers: a.headers,
          body: bytes.toString("utf8"),
          token_counts: null,
        }
        : {
          status_code: a.status,
          headers: a.headers,
          body: "",
          body_base64: bytes.toString("base64"),
          token_counts: null,
        },
    });
  });
}

/**
 * A turn's reads as one Buffer: Buffer.concat's copy without its per-part
 * checks, about half its cost a part in Deno 2.9 (issue 31: a stream's reads
 * of one turn are joined on every turn).
 */
function joined(reads: readonly Buffer[]): Buffer {
  let size = 0;
  for (const r of reads) size += r.length;
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const r of reads) {
    out.set(r, at);
    at += r.length;
  }
  return out;
}

const EMPTY_BYTES: Uint8Array = Buffer.alloc(0);

/** The passage's bytes as a Buffer (a view when it made a plain Uint8Array). */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes)
    ? bytes
    : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
}
