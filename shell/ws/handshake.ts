// The WebSocket opening handshake (RFC 6455 section 4): the client's upgrade
// request and its check of the server's answer; the server's check of a
// request and its 101 answer. Pure functions over text; the sockets are
// client.ts's and accept.ts's. No extension and no subprotocol is offered or
// accepted.
import { createHash, randomBytes } from "node:crypto";

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/** Largest response head the client reads before giving up on a server. */
export const HEAD_BYTES_MAX = 16 * 1024;

/** Sec-WebSocket-Accept for a Sec-WebSocket-Key. */
export function acceptKey(key: string): string {
  return createHash("sha1").update(key + GUID).digest("base64");
}

/** A fresh Sec-WebSocket-Key: 16 random bytes, base64. */
export function newClientKey(): string {
  return randomBytes(16).toString("base64");
}

/** The client's upgrade request for `url` (ws: or wss:), with `headers` added. */
export function clientRequest(
  url: URL,
  key: string,
  headers: Record<string, string>,
): string {
  const lines = [
    `GET ${url.pathname || "/"}${url.search} HTTP/1.1`,
    `Host: ${url.host}`,
    "Upgrade: websocket",
    "Connection: Upgrade",
    `Sec-WebSocket-Key: ${key}`,
    "Sec-WebSocket-Version: 13",
  ];
  for (const [name, value] of Object.entries(headers)) {
    if (/[\r\n]/.test(name + value)) {
      throw new Error(`header ${name} holds a line break`);
    }
    lines.push(`${name}: ${value}`);
  }
  return lines.join("\r\n") + "\r\n\r\n";
}

/** Header lookup by lower-case name (first value). */
export type Headers = (name: string) => string | undefined;

/** The status code and headers of a response head (latin1 text, CR LF lines). */
export function parseResponseHead(
  text: string,
): { status: number; header: Headers } | null {
  const lines = text.split("\r\n");
  const m = /^HTTP\/1\.1 (\d{3})(?: |$)/.exec(lines[0] ?? "");
  if (m === null) return null;
  const headers = new Map<string, string>();
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    if (!headers.has(name)) headers.set(name, line.slice(colon + 1).trim());
  }
  return { status: Number(m[1]), header: (n) => headers.get(n) };
}

/** Why the server's answer does not open a WebSocket for `key`, or null when it does. */
export function responseProblem(
  head: { status: number; header: Headers },
  key: string,
): string | null {
  if (head.status !== 101) return `unexpected server response: ${head.status}`;
  if (head.header("upgrade")?.toLowerCase() !== "websocket") {
    return "invalid Upgrade header";
  }
  if (!hasToken(head.header("connection"), "upgrade")) {
    return "invalid Connection header";
  }
  if (head.header("sec-websocket-accept") !== acceptKey(key)) {
    return "invalid Sec-WebSocket-Accept header";
  }
  if (head.header("sec-websocket-extensions") !== undefined) {
    return "server sent an extension we did not offer";
  }
  if (head.header("sec-websocket-protocol") !== undefined) {
    return "server sent a subprotocol we did not offer";
  }
  return null;
}

/** Request headers by lower-case name, as node:http gives them. */
export type HeaderRecord = Readonly<
  Record<string, string | string[] | undefined>
>;

/** A request's method and its headers: what the server needs of an upgrade. */
export type UpgradeRequest = { method: string; headers: HeaderRecord };

/** The first value of header `name` (lower case). */
export function headerOf(
  headers: HeaderRecord,
  name: string,
): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * Why `req` is not a WebSocket upgrade we take (answered 400), or null. The
 * key must be 16 bytes in base64 (RFC 6455 section 4.1).
 */
export function upgradeProblem(req: UpgradeRequest): string | null {
  const header = (name: string) => headerOf(req.headers, name);
  if (req.method !== "GET") return "method must be GET";
  if (header("upgrade")?.toLowerCase() !== "websocket") {
    return "missing or invalid Upgrade header";
  }
  if (!hasToken(header("connection"), "upgrade")) {
    return "missing or invalid Connection header";
  }
  if (header("sec-websocket-version") !== "13") {
    return "missing or invalid Sec-WebSocket-Version header";
  }
  const key = header("sec-websocket-key");
  if (key === undefined || !/^[+/0-9A-Za-z]{22}==$/.test(key.trim())) {
    return "missing or invalid Sec-WebSocket-Key header";
  }
  return null;
}

/** The server's 101 answer to a request with Sec-WebSocket-Key `key`. */
export function switchingProtocols(key: string): string {
  return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n" +
    `Connection: Upgrade\r\nSec-WebSocket-Accept: ${
      acceptKey(key.trim())
    }\r\n\r\n`;
}

/** The answer to a request that is not a valid upgrade (then the socket closes). */
export function badRequest(problem: string): string {
  return "HTTP/1.1 400 Bad Request\r\nconnection: close\r\n" +
    "content-type: text/plain\r\nsec-websocket-version: 13\r\n" +
    `content-length: ${problem.length}\r\n\r\n${problem}`;
}

/** Whether a comma-separated header holds `token` (case-insensitive). */
function hasToken(value: string | undefined, token: string): boolean {
  if (value === undefined) return false;
  return value.split(",").some((t) => t.trim().toLowerCase() === token);
}
