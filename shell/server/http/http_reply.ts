// The one JSON reply helper (and the operator error built on it), and the one
// way to end a connection after an answer (issue 15): every route that refuses
// a client for what it sends (too big, too slow, too many) answers first, then
// closes, so the client sees why.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { apiError, type ClientError, errorShapeOf } from "../../../core/mod.ts";
import { errorBody, errorHeaders } from "./errors.ts";
import { cutAfterLinger } from "../linger.ts";

/**
 * An error from the catalogue (core/protocol/errors.ts) in the OpenAI shape,
 * for the operator routes (admin, lifecycle, /metrics) and the client routes
 * that answer in it; its Retry-After from the error. `extra` goes beside
 * `error` in the body.
 */
export function replyError(
  res: ServerResponse,
  error: ClientError,
  headers: Record<string, string> = {},
  extra: Record<string, unknown> = {},
): void {
  const body = JSON.parse(errorBody("openai", error)) as Record<
    string,
    unknown
  >;
  sendJson(res, error.status, { ...body, ...extra }, {
    ...errorHeaders(error),
    ...headers,
  });
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, {
    "content-type": "application/json",
    "cache-control": "no-store",
    ...headers,
  });
  res.end(JSON.stringify(body));
}

/**
 * Marks the answer about to be written as the connection's last: the socket is
 * half-closed once it is flushed, and destroyed if the client keeps sending.
 * Ending instead of destroying at once lets the client read the answer (a
 * close with unread input would send a reset that can discard it).
 */
export function closeAfterAnswer(res: ServerResponse): void {
  if (!res.headersSent) res.setHeader("connection", "close");
  const socket = res.socket;
  if (socket === null) return;
  res.once("finish", () => endSoon(socket));
}

/**
 * A route that answers without reading the body (a 404, /health with a body)
 * leaves the rest of it on the connection, where no body timeout watches it:
 * once the answer is out, such a connection is ended (issue 15, found by the
 * HTTP fuzz: a truncated body to an unknown path held its socket forever).
 */
export function closeIfBodyUnread(
  req: IncomingMessage,
  res: ServerResponse,
): void {
  // Taken now: a finished response has already let go of its socket.
  const socket = req.socket;
  res.once("finish", () => {
    if (!req.complete) endSoon(socket);
  });
}

/** Our FIN now; unread input after it is drained a while, then the socket is cut. */
function endSoon(socket: Socket | Duplex): void {
  socket.end();
  cutAfterLinger(socket, () => socket.destroy());
}

/**
 * A request node:http could not parse (unknown method, bad framing, oversized
 * headers) never reaches a route: it gets one JSON error, in Anthropic's shape
 * when its request line names /v1/messages, else OpenAI's, and the connection
 * closes.
 */
export function answerUnparsable(
  err: Error & { code?: string; rawPacket?: unknown },
  socket: { writable: boolean; end(data: string): void; destroy(): void },
): void {
  if (err.code === "ECONNRESET" || !socket.writable) return socket.destroy();
  const tooLarge = err.code === "HPE_HEADER_OVERFLOW";
  const error = tooLarge
    ? apiError("headers_too_large")
    : apiError("bad_request", { what: "HTTP request" });
  const raw = err.rawPacket instanceof Uint8Array
    ? Buffer.from(err.rawPacket).subarray(0, 256).toString("latin1")
    : "";
  const path = /^\S+ (\S+)/.exec(raw)?.[1] ?? "";
  const body = errorBody(errorShapeOf(path), error);
  socket.end(
    `HTTP/1.1 ${error.status} ${
      tooLarge ? "Request Header Fields Too Large" : "Bad Request"
    }\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: ${
      Buffer.byteLength(body)
    }\r\n\r\n${body}`,
  );
}

/**
 * The request target as a URL, or null when it is not one. `new URL(raw, base)`
 * throws on targets like `//` (read as a host-less authority): an exception in
 * the handler until the HTTP fuzz found it (issue 15). Prefixing the
 * origin reads every target as a path.
 */
export function requestUrl(raw: string | undefined): URL | null {
  try {
    return new URL(`http://relay.invalid${raw?.startsWith("/") ? raw : "/"}`);
  } catch {
    return null;
  }
}

/**
 * node:http keeps a response's head (`_header`, also what `headersSent` reads)
 * for the response's life as the rope of small strings it was concatenated
 * from: ~40 nodes, ~1.3 KB for an SSE head. Reading one character makes V8
 * flatten it in place into one string (issue 18); the value is unchanged.
 */
export function compactHead(res: ServerResponse): void {
  const head: unknown = (res as unknown as { _header?: unknown })._header;
  if (typeof head === "string") head.charCodeAt(0);
}
