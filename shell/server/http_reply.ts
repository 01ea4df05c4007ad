// The one JSON reply helper (and the operator error built on it), and the one
// way to end a connection after an answer (issue 15): every route that refuses a client for what it sends (too
// big, too slow, too many) answers first, then closes, so the client sees why.
import type { ServerResponse } from "node:http";

/** An error in the OpenAI shape for the operator routes (admin, lifecycle, /metrics). */
export function sendAdminError(
  res: ServerResponse,
  status: number,
  code: string,
  message: string,
  headers: Record<string, string> = {},
  extra: Record<string, unknown> = {},
): void {
  const type = status === 401
    ? "authentication_error"
    : status === 403
    ? "permission_error"
    : status === 404
    ? "not_found_error"
    : status >= 500
    ? "server_error"
    : "invalid_request_error";
  sendJson(res, status, { error: { message, type, code }, ...extra }, headers);
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

/** Unread input after our FIN is drained this long, then the socket is cut. */
const LINGER_MS = 2000;

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
  res.once("finish", () => {
    socket.end();
    const cut = setTimeout(() => socket.destroy(), LINGER_MS);
    socket.once("close", () => clearTimeout(cut));
  });
}
