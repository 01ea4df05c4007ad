// A response's head as the client door writes it (issue 31): the status line,
// the route's headers as given, then what node:http added and clients rely
// on, in node's order and spelling: `Date`, `Connection` (with `Keep-Alive:
// timeout=65` on a kept connection), and the framing (`Content-Length` when
// the whole body is known at the head, else `Transfer-Encoding: chunked` on
// HTTP/1.1, else the body runs to the close).

/** node's reason phrases (`http.STATUS_CODES`) for the statuses a relay sends. */
const REASONS: Record<number, string> = {
  100: "Continue",
  101: "Switching Protocols",
  200: "OK",
  201: "Created",
  202: "Accepted",
  203: "Non-Authoritative Information",
  204: "No Content",
  205: "Reset Content",
  206: "Partial Content",
  207: "Multi-Status",
  300: "Multiple Choices",
  301: "Moved Permanently",
  302: "Found",
  303: "See Other",
  304: "Not Modified",
  307: "Temporary Redirect",
  308: "Permanent Redirect",
  400: "Bad Request",
  401: "Unauthorized",
  402: "Payment Required",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  406: "Not Acceptable",
  407: "Proxy Authentication Required",
  408: "Request Timeout",
  409: "Conflict",
  410: "Gone",
  411: "Length Required",
  412: "Precondition Failed",
  413: "Payload Too Large",
  414: "URI Too Long",
  415: "Unsupported Media Type",
  416: "Range Not Satisfiable",
  417: "Expectation Failed",
  418: "I'm a Teapot",
  421: "Misdirected Request",
  422: "Unprocessable Entity",
  423: "Locked",
  424: "Failed Dependency",
  425: "Too Early",
  426: "Upgrade Required",
  428: "Precondition Required",
  429: "Too Many Requests",
  431: "Request Header Fields Too Large",
  451: "Unavailable For Legal Reasons",
  500: "Internal Server Error",
  501: "Not Implemented",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
  505: "HTTP Version Not Supported",
  506: "Variant Also Negotiates",
  507: "Insufficient Storage",
  508: "Loop Detected",
  509: "Bandwidth Limit Exceeded",
  510: "Not Extended",
  511: "Network Authentication Required",
};

export function statusLine(status: number): string {
  return `HTTP/1.1 ${status} ${REASONS[status] ?? "unknown"}\r\n`;
}

/** How a response's body is delimited, chosen when its head is written. */
export type Framing = "none" | "length" | "chunked" | "close";

/** The keep-alive timeout node:http had here (`server.keepAliveTimeout`). */
export const KEEP_ALIVE_MS = 65_000;

let dateAt = 0;
let dateText = "";

/** The `Date` value, formatted once a second (as node does). */
export function httpDate(): string {
  const now = Date.now();
  if (now - dateAt >= 1000) {
    dateAt = now - (now % 1000);
    dateText = new Date(dateAt).toUTCString();
  }
  return dateText;
}

export type HeadPlan = {
  status: number;
  headers: Record<string, string>;
  /** The request was HEAD, or the status has no body (1xx, 204, 304). */
  noBody: boolean;
  /** The body's byte length when all of it is known now; -1 when not. */
  knownLength: number;
  /** The connection may carry another request after this one. */
  keepAlive: boolean;
  /** The client speaks HTTP/1.1 (chunked framing is possible). */
  http11: boolean;
};

/**
 * The head's text and what it decided: the framing, and whether the
 * connection stays open after this response.
 */
export function renderHead(
  plan: HeadPlan,
): { text: string; framing: Framing; keepAlive: boolean } {
  let text = statusLine(plan.status);
  let hasDate = false;
  let connection: string | null = null;
  let length: string | null = null;
  let chunked = false;
  const h = plan.headers;
  for (const name in h) {
    const value = h[name]!;
    text += `${name}: ${value}\r\n`;
    switch (name.length) {
      case 4:
        if (name.toLowerCase() === "date") hasDate = true;
        break;
      case 10:
        if (name.toLowerCase() === "connection") connection = value;
        break;
      case 14:
        if (name.toLowerCase() === "content-length") length = value;
        break;
      case 17:
        if (name.toLowerCase() === "transfer-encoding") {
          chunked = /chunked\s*$/i.test(value);
        }
        break;
    }
  }
  if (!hasDate) text += `Date: ${httpDate()}\r\n`;
  let framing: Framing;
  let addLength = false;
  if (plan.noBody) framing = "none";
  else if (length !== null) framing = "length";
  else if (chunked) framing = "chunked";
  else if (plan.knownLength >= 0) {
    framing = "length";
    addLength = true;
  } else framing = plan.http11 ? "chunked" : "close";
  let keepAlive = plan.keepAlive && framing !== "close";
  if (connection !== null) {
    if (/(?:^|,)\s*close\s*(?:,|$)/i.test(connection)) keepAlive = false;
  } else if (keepAlive) {
    text += `Connection: keep-alive\r\nKeep-Alive: timeout=${
      KEEP_ALIVE_MS / 1000
    }\r\n`;
  } else text += "Connection: close\r\n";
  if (addLength) text += `Content-Length: ${plan.knownLength}\r\n`;
  else if (framing === "chunked" && !chunked) {
    text += "Transfer-Encoding: chunked\r\n";
  }
  return { text: text + "\r\n", framing, keepAlive };
}
