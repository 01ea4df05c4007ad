// The one JSON reply helper (and the operator error built on it), and the one
// way to end a connection after an answer (issue 15): every route that refuses
// a client for what it sends (too big, too slow, too many) answers first, then
// closes, so the client sees why.
import { Buffer } from "node:buffer";
import type { HttpResponse } from "../door/exchange.ts";
import type { ParseFailure } from "../door/request_parser.ts";
import { apiError, type ClientError, errorShapeOf } from "../../../core/mod.ts";
import { errorBody, errorHeaders } from "./errors.ts";

/**
 * An error from the catalogue (core/protocol/errors.ts) in the OpenAI shape,
 * for the operator routes (admin, lifecycle, /metrics) and the client routes
 * that answer in it; its Retry-After from the error. `extra` goes beside
 * `error` in the body.
 */
export function replyError(
  res: HttpResponse,
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
  res: HttpResponse,
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
 * Marks the answer about to be written as the connection's last: the door
 * half-closes the connection once it is out, and cuts it if the client keeps
 * sending (door/connection.ts). Ending instead of cutting at once lets the
 * client read the answer (a close with unread input would send a reset that
 * can discard it).
 */
export function closeAfterAnswer(res: HttpResponse): void {
  res.closeAfter();
}

/**
 * The answer to a request the door could not parse (unknown method, bad
 * framing, oversized head): one JSON error, in Anthropic's shape when its
 * request line names /v1/messages, else OpenAI's; the connection then closes.
 */
export function answerUnparsable(
  failure: ParseFailure,
  start: string,
): string {
  const tooLarge = failure === "headTooLarge";
  const error = tooLarge
    ? apiError("headers_too_large")
    : apiError("bad_request", { what: "HTTP request" });
  const path = /^\S+ (\S+)/.exec(start)?.[1] ?? "";
  const body = errorBody(errorShapeOf(path), error);
  return `HTTP/1.1 ${error.status} ${
    tooLarge ? "Request Header Fields Too Large" : "Bad Request"
  }\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: ${
    Buffer.byteLength(body)
  }\r\n\r\n${body}`;
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
