// The request head the worker's HTTP/1.1 client sends: byte for byte what
// node:http's ClientRequest with a keep-alive Agent writes for the same call
// (issue 18; the differential test compares them), so a backend cannot tell
// the two clients apart:
//
//   POST /v1/chat/completions HTTP/1.1\r\n
//   <the caller's headers, in their order, names as given>\r\n
//   Host: <host>[:<port>]\r\n          (unless the caller gave one)
//   Authorization: Basic …\r\n        (URL credentials, unless the caller gave one)
//   Connection: keep-alive\r\n
//   \r\n

/** Where a request goes: what `urlToHttpOptions` gives for an http: URL. */
export type RequestTarget = {
  /** Host name or address, IPv6 without brackets. */
  host: string;
  port: number;
  /** Path and query, "/…". */
  path: string;
  /** "user:password" of the URL, decoded, if any. */
  auth: string | null;
};

/** What node rejects in a path (ERR_UNESCAPED_CHARACTERS). */
const INVALID_PATH = /[^\u0021-\u00ff]/;
/** What node rejects in a header value (ERR_INVALID_CHAR). */
const INVALID_HEADER_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
/** tchar of RFC 9110; node rejects other names (ERR_INVALID_HTTP_TOKEN). */
const TOKEN = /^[\^_`a-zA-Z\-0-9!#$%&'*+.|~]+$/;

/**
 * Methods and header names already found to be tokens (issue 31: the same
 * few on every request; a lookup instead of a regex each). Bounded: a name
 * past the bound is tested every time, as before.
 */
const KNOWN_TOKENS = new Set<string>();
const KNOWN_TOKENS_MAX = 256;

function knownToken(s: string): boolean {
  if (KNOWN_TOKENS.has(s)) return true;
  if (!TOKEN.test(s)) return false;
  if (KNOWN_TOKENS.size < KNOWN_TOKENS_MAX) KNOWN_TOKENS.add(s);
  return true;
}

/** Throws a TypeError like node's for what ClientRequest would refuse to send. */
function check(
  method: string,
  target: RequestTarget,
  headers: Record<string, string>,
) {
  if (!knownToken(method)) {
    throw new TypeError(`Method must be a valid HTTP token ["${method}"]`);
  }
  if (INVALID_PATH.test(target.path)) {
    throw new TypeError("Request path contains unescaped characters");
  }
  for (const name in headers) {
    if (!knownToken(name)) {
      throw new TypeError(`Header name must be a valid HTTP token ["${name}"]`);
    }
    if (INVALID_HEADER_VALUE.test(headers[name]!)) {
      throw new TypeError(`Invalid character in header content ["${name}"]`);
    }
  }
}

/** The Host header node derives from the target (port 80 left out). */
export function hostHeader(target: RequestTarget): string {
  const h = target.host.includes(":") && !target.host.startsWith("[")
    ? `[${target.host}]`
    : target.host;
  return target.port === 80 ? h : `${h}:${target.port}`;
}

/**
 * The head of a request with a body of `content-length` bytes (the caller sets
 * that header). Throws TypeError where node:http would.
 */
export function requestHead(
  method: string,
  target: RequestTarget,
  headers: Record<string, string>,
): string {
  check(method, target, headers);
  let head = `${method} ${target.path} HTTP/1.1\r\n`;
  let hasHost = false;
  let hasAuthorization = false;
  for (const name in headers) {
    const lower = name.toLowerCase();
    if (lower === "host") hasHost = true;
    else if (lower === "authorization") hasAuthorization = true;
    head += `${name}: ${headers[name]}\r\n`;
  }
  if (!hasHost) head += `Host: ${hostHeader(target)}\r\n`;
  if (target.auth !== null && !hasAuthorization) {
    head += `Authorization: Basic ${
      Buffer.from(target.auth).toString("base64")
    }\r\n`;
  }
  return `${head}Connection: keep-alive\r\n\r\n`;
}
