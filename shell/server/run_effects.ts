// Carries out core effects: the exhaustive switch over `Effect` (conventions §1).
// Writes are enqueued synchronously; nothing here decides anything about routing,
// timing or retries.
import type { HttpResponse } from "./door/exchange.ts";
import { Buffer } from "node:buffer";
import { assertNever } from "../../core/assert_never.ts";
import {
  clientResponseHeaders,
  type Effect,
  encodeFrame,
  type Event,
  lifecycleAnswer,
} from "../../core/mod.ts";
import type { StreamHead } from "../../core/vocabulary.ts";
import type { Logger } from "../log.ts";
import type {
  ClientContext,
  Clients,
  LifecycleCallers,
} from "./http/clients.ts";
import { errorBody, errorHeaders, sseErrorEvent } from "./http/errors.ts";
import {
  endsOnEventBoundary,
  isEventStream,
} from "../../core/protocol/sse_events.ts";
import { replyError, sendJson } from "./http/http_reply.ts";
import { CACHE_HEADER_DEFAULTS } from "./http/tenancy.ts";
import { cutAfterLinger } from "./linger.ts";
import { pieceBytes } from "../piece_bytes.ts";
import type { WsConnection } from "../ws/connection.ts";

export const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  // Keeps an nginx in front from buffering the stream (time to first token).
  "x-accel-buffering": "no",
};

export type EffectDeps = {
  clients: Clients;
  lifecycleCallers: LifecycleCallers;
  /** Each worker's socket: frames sent in one turn leave in one write (shell/ws/connection.ts). */
  sockets: Map<string, WsConnection>;
  log: Logger;
  clientBufferBytes: number;
  submit: (event: Event) => void;
  now: () => number;
  onRequestFinished: (
    effect: Extract<Effect, { kind: "requestFinished" }>,
  ) => void;
  onShutdownComplete: () => void;
  /** Connect attempts awaiting the core's answer (worker_socket.ts). */
  admission?: {
    accept(workerId: string): boolean;
    refuse(workerId: string, code: number, reason: string): boolean;
  };
};

const encoder = new TextEncoder();

/** A close reason must fit 123 bytes: cut whole characters, never inside one. */
export function closeReason(reason: string): string {
  if (encoder.encode(reason).length <= 123) return reason;
  let out = "";
  let bytes = 0;
  for (const ch of reason) {
    const n = encoder.encode(ch).length;
    if (bytes + n > 120) break;
    out += ch;
    bytes += n;
  }
  return out + "...";
}

const HTTP_TOKEN = /^[\^_`a-zA-Z\-0-9!#$%&'*+.|~]+$/;
const INVALID_HEADER_CHAR = /[^\t\x20-\x7e\x80-\xff]/;

/** Whether a header may go to the client as HTTP (name and value). */
function acceptable(k: string, v: string): boolean {
  // node:http's rules (checkIsHttpToken, checkInvalidHeaderChar), which the
  // door keeps: a bad name or a value that could split the head is refused.
  return HTTP_TOKEN.test(k) && !INVALID_HEADER_CHAR.test(v);
}

/** Holds a refused header's place in `answerHead` until the head is done. */
const REFUSED = "\u0000";

/**
 * The head of an answer or a stream: `own` (the relay's spec 004 defaults),
 * then the backend's headers a client may see (clientResponseHeaders), then
 * the queue wait, each later one overriding in place. Made safe to send: a
 * status outside 200–599 (a 1xx would be a malformed final answer) becomes
 * 502, and a header that is not HTTP (a name that is not a token, a value with control characters or beyond latin1, which could split the head) is
 * dropped rather than losing the whole answer (C34: the client always gets
 * one). One object built and only the backend's headers checked (issue 31: a
 * merged copy and a checked copy of it were two more objects per answer).
 */
export function answerHead(
  status: number,
  own: Readonly<Record<string, string>>,
  backend: Record<string, string>,
  queueWaitMs: number,
): { status: number; headers: Record<string, string> } {
  const headers: Record<string, string> = { ...own };
  const kept = clientResponseHeaders(backend);
  let refused = false;
  for (const k in kept) {
    const v = kept[k]!;
    if (acceptable(k, v)) headers[k] = v;
    else {
      headers[k] = REFUSED;
      refused = true;
    }
  }
  headers["x-queue-wait-ms"] = String(queueWaitMs);
  if (refused) {
    for (const k in headers) if (headers[k] === REFUSED) delete headers[k];
  }
  return {
    status: status >= 200 && status <= 599 ? status : 502,
    headers,
  };
}

export function makeEffectRunner(deps: EffectDeps): (effect: Effect) => void {
  // Answers in pieces being written out, by request id (cutResponse).
  const sending = new Map<string, HttpResponse>();
  return (effect) => {
    switch (effect.kind) {
      case "writeChunk": {
        const c = deps.clients.get(effect.requestId);
        if (c === undefined || c.stalled) return;
        c.res.write(effect.chunk);
        if (effect.chunk.length > 0) {
          c.midEvent = !endsOnEventBoundary(effect.chunk);
        }
        if (c.res.writableLength > deps.clientBufferBytes) {
          c.stalled = true;
          deps.submit({
            kind: "clientStalled",
            atMs: deps.now(),
            requestId: effect.requestId,
          });
        }
        return;
      }
      case "sendToWorker": {
        const ws = deps.sockets.get(effect.workerId);
        if (ws === undefined) return;
        ws.sendText(encodeFrame(effect.message));
        return;
      }
      case "startStream":
        return startStream(deps, effect);
      case "endStream": {
        const c = endClient(deps, effect.requestId);
        if (c === undefined) return;
        if (c.stalled) {
          // Its buffer is full, so an error event could not arrive anyway; keeping
          // the socket would keep every buffered byte for as long as it stays open.
          c.res.destroy();
          return;
        }
        // The body is cut (no last chunk), so the client sees it broken,
        // where no error event can be written: stream-head-v1's NDJSON or
        // audio bytes take none; and (C60) bytes that end inside an event
        // cannot be taken back: an error event glued onto them would read as
        // corrupt JSON, so the client sees a broken response, never a
        // malformed event.
        if (
          effect.error !== null && (c.rawStream === true || c.midEvent === true)
        ) {
          const where = c.rawStream === true ? "" : " mid-event";
          deps.log("warn", `stream broken${where}, client connection cut`, {
            request_id: effect.requestId,
            code: effect.error.code,
          });
          c.res.destroy();
          return;
        }
        if (effect.error !== null) {
          c.res.write(sseErrorEvent(c.api, effect.error));
        }
        c.res.end();
        return;
      }
      case "respond":
        return respond(deps, sending, effect);
      case "cutResponse":
        // Its close is the responseSent that gives the bytes back.
        sending.get(effect.requestId)?.destroy();
        return;
      case "respondError":
        return respondError(deps, effect);
      case "acceptWorker":
        deps.admission?.accept(effect.workerId);
        return;
      case "rejectWorker":
        if (
          deps.admission?.refuse(effect.workerId, effect.code, effect.reason)
        ) {
          return;
        }
      // falls through: a socket already open is closed like any other
      case "closeWorker":
        return closeWorker(deps, effect.workerId, effect.code, effect.reason);
      case "log":
        deps.log(effect.level, effect.message, effect.fields);
        return;
      case "requestFinished":
        deps.onRequestFinished(effect);
        return;
      case "shutdownComplete":
        deps.onShutdownComplete();
        return;
      case "lifecycleTaskChanged":
        return; // Read by metrics and the capabilities cache through the effect tap (relay.ts).
      case "replyLifecycle":
        return replyLifecycle(deps, effect);
      case "modelLoadStarted":
      case "modelLoadFinished":
      case "modelEvicted":
        return; // Issue 30: read by metrics through the effect tap (relay.ts).
      default:
        assertNever(effect);
    }
  };
}

type EffectOf<K extends Effect["kind"]> = Extract<Effect, { kind: K }>;

/** The client that `requestId` names, marked ended and forgotten; undefined if gone. */
function endClient(
  deps: EffectDeps,
  requestId: string,
): ClientContext | undefined {
  const c = deps.clients.get(requestId);
  if (c === undefined) return undefined;
  c.ended = true;
  deps.clients.delete(requestId);
  return c;
}

function startStream(
  deps: EffectDeps,
  effect: EffectOf<"startStream">,
): void {
  const c = deps.clients.get(effect.requestId);
  if (c === undefined) return;
  if (effect.head === undefined) {
    c.res.writeHead(200, {
      ...SSE_HEADERS,
      ...CACHE_HEADER_DEFAULTS,
      "x-queue-wait-ms": String(effect.queueWaitMs ?? 0),
    });
  } else {
    const head = streamHead(effect.head, effect.queueWaitMs ?? 0);
    c.rawStream = !isEventStream(head.headers["content-type"]);
    c.res.writeHead(head.status, head.headers);
  }
  // Queued now; the first chunk, which the core sends in the same turn,
  // leaves in the same write (the door writes a turn's bytes at once).
  c.res.flushHeaders();
}

/** What the relay sets on a stream's head before the backend's headers. */
const STREAM_OWN: Readonly<Record<string, string>> = {
  ...CACHE_HEADER_DEFAULTS,
  "x-accel-buffering": "no",
};

/**
 * stream-head-v1 (issue 25): the backend's status and headers for a stream,
 * filtered as a whole answer's are (no length: node frames the stream), with
 * the spec 004 headers, and nginx's buffering off unless the backend said.
 */
export function streamHead(
  from: StreamHead,
  queueWaitMs: number,
): { status: number; headers: Record<string, string> } {
  return answerHead(from.status, STREAM_OWN, from.headers, queueWaitMs);
}

const NO_PIECES: readonly Uint8Array[] = [];

function respond(
  deps: EffectDeps,
  sending: Map<string, HttpResponse>,
  effect: EffectOf<"respond">,
): void {
  const requestId = effect.requestId;
  const c = endClient(deps, requestId);
  if (c === undefined) {
    // The client left before its answer came: nothing is held for it.
    if (effect.bodyPieces !== undefined) {
      deps.submit({ kind: "responseSent", atMs: deps.now(), requestId });
    }
    return;
  }
  // Spec 004 headers: the backend's when it sent them, else false/0.
  const head = answerHead(
    effect.status,
    CACHE_HEADER_DEFAULTS,
    effect.headers,
    effect.queueWaitMs ?? 0,
  );
  // body-bytes-v1 (issue 25): a binary answer's bytes, exactly as the backend sent them.
  const rest = effect.bodyBase64 === undefined ? effect.body : Buffer.concat([
    Buffer.from(effect.body),
    Buffer.from(effect.bodyBase64, "base64"),
  ]);
  const restBytes = pieceBytes(rest);
  let length = restBytes;
  for (const p of effect.bodyPieces ?? NO_PIECES) length += p.length;
  const framing = contentLength(c.res, head.status, effect.headers, length);
  if (framing !== null) head.headers["content-length"] = framing;
  if (effect.bodyPieces === undefined) {
    c.res.writeHead(head.status, head.headers);
    c.res.end(rest, restBytes);
    return;
  }
  c.res.writeHead(head.status, head.headers);
  sending.set(requestId, c.res);
  writePieces(c.res, effect.bodyPieces.slice(), rest, {
    progress: (written) =>
      deps.submit({
        kind: "responseProgress",
        atMs: deps.now(),
        requestId,
        written,
      }),
    sent: () => {
      sending.delete(requestId);
      deps.submit({ kind: "responseSent", atMs: deps.now(), requestId });
    },
  });
}

/**
 * A whole answer's `content-length` (issue 33.11: a one-frame answer went out
 * chunked): the bytes it carries, which are the backend's own when it sent
 * one; a HEAD answer carries no bytes, so it keeps the backend's; 204 and 304
 * have none.
 */
function contentLength(
  res: HttpResponse,
  status: number,
  backend: Record<string, string>,
  length: number,
): string | null {
  if (status === 204 || status === 304) return null;
  if (res.req.method === "HEAD") {
    for (const k in backend) {
      if (k.toLowerCase() === "content-length") {
        return /^\d+$/.test(backend[k]!) ? backend[k]! : null;
      }
    }
    return null;
  }
  return String(length);
}

/**
 * Issue 24: an answer assembled from pieces goes out piece by piece as the
 * client's socket drains, each piece let go once written, so the server never
 * holds a joined copy nor the whole answer encoded at once beside its pieces.
 * `pieces` is this function's own copy: written slots are cleared. Each drain
 * reports the pieces' bytes written so far (issue 33.3: the core's write
 * deadline, and the budget they leave).
 */
function writePieces(
  res: HttpResponse,
  pieces: (Uint8Array | undefined)[],
  rest: string | Uint8Array,
  report: { progress: (written: number) => void; sent: () => void },
): void {
  let i = 0;
  let written = 0;
  const next = (): void => {
    while (i < pieces.length) {
      const piece = pieces[i]!;
      pieces[i++] = undefined;
      written += piece.length;
      if (!res.write(piece)) {
        res.once("drain", drained);
        return;
      }
    }
    res.end(rest);
  };
  const drained = (): void => {
    report.progress(written);
    next();
  };
  // Written out, or the client left mid-answer (the rest is dropped at once):
  // either way the core's budget gets the bytes back. The door emits "close"
  // after "finish" too.
  res.once("close", () => {
    res.off("drain", drained);
    pieces.length = 0;
    report.sent();
  });
  next();
}

function respondError(
  deps: EffectDeps,
  effect: EffectOf<"respondError">,
): void {
  const c = endClient(deps, effect.requestId);
  if (c === undefined) return;
  c.res.writeHead(effect.error.status, {
    ...errorHeaders(effect.error),
    "x-queue-wait-ms": String(effect.queueWaitMs ?? 0),
  });
  c.res.end(errorBody(c.api, effect.error));
}

function closeWorker(
  deps: EffectDeps,
  workerId: string,
  code: number,
  reason: string,
): void {
  const ws = deps.sockets.get(workerId);
  if (ws === undefined) return;
  deps.sockets.delete(workerId);
  ws.close(code, closeReason(reason));
  // The close event comes back as workerDisconnected; the core ignores it.
  // A peer that never answers the close handshake is cut.
  cutAfterLinger(ws, () => ws.terminate());
}

/** The core's answer to a lifecycle call, rendered by core/views/lifecycle_reply.ts. */
function replyLifecycle(
  deps: EffectDeps,
  effect: EffectOf<"replyLifecycle">,
): void {
  const res = deps.lifecycleCallers.get(effect.task.id);
  if (res === undefined) return; // the caller left
  deps.lifecycleCallers.delete(effect.task.id);
  const answer = lifecycleAnswer(effect.reply, effect.task);
  if (answer.kind === "document") {
    sendJson(res, answer.status, answer.body);
  } else {
    replyError(res, answer.error, {}, answer.extra);
  }
}
