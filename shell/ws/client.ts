// A WebSocket client over Deno.connect (issue 31): TCP_NODELAY on, so a frame
// sent right after another never waits for the peer's delayed ACK (Deno's own
// WebSocket client lacks it: 44 ms between a head and a first piece), and
// Deno.startTls over the same socket for wss://.
import {
  makeConnection,
  type WsConnection,
  type WsEvents,
} from "./connection.ts";
import {
  clientRequest,
  HEAD_BYTES_MAX,
  newClientKey,
  parseResponseHead,
  responseProblem,
} from "./handshake.ts";
import { connTransport } from "./transport.ts";
import { headEnd, latin1 } from "../http1/syntax.ts";

export type ClientOptions = {
  /** Added to the upgrade request (X-Worker-Secret, Authorization, ...). */
  headers?: Record<string, string>;
  /** Largest message taken from the server; larger closes with 1009. */
  maxPayload: number;
  /** After our close frame, how long the server has to end the socket (default 30 s). */
  closeTimeoutMs?: number;
};

/**
 * Opens a connection to `url` (ws: or wss:). It starts "connecting": frames
 * sent meanwhile leave right after the handshake. A connect or handshake that
 * fails ends in onClose(1006, why, false) without onOpen.
 */
export function connectWebSocket(
  url: string | URL,
  opts: ClientOptions,
  events: WsEvents,
): WsConnection {
  const opening = makeConnection({
    role: "client",
    maxPayload: opts.maxPayload,
    ...(opts.closeTimeoutMs === undefined
      ? {}
      : { closeTimeoutMs: opts.closeTimeoutMs }),
  }, events);
  handshake(new URL(url), opts.headers ?? {}, opening);
  return opening.connection;
}

async function handshake(
  url: URL,
  headers: Record<string, string>,
  opening: ReturnType<typeof makeConnection>,
): Promise<void> {
  let conn: Deno.Conn | null = null;
  try {
    const secure = url.protocol === "wss:" || url.protocol === "https:";
    const hostname = url.hostname.replace(/^\[(.*)\]$/, "$1");
    const port = Number(url.port || (secure ? 443 : 80));
    const tcp = await Deno.connect({ hostname, port });
    conn = tcp;
    tcp.setNoDelay(true);
    if (secure) conn = await Deno.startTls(tcp, { hostname });
    const key = newClientKey();
    const request = new TextEncoder().encode(clientRequest(url, key, headers));
    let at = 0;
    while (at < request.length) at += await conn.write(request.subarray(at));
    const { head, leftover } = await readHead(conn);
    const parsed = parseResponseHead(head);
    const problem = parsed === null
      ? "unreadable server response"
      : responseProblem(parsed, key);
    if (problem !== null) return opening.abort(problem, connTransport(conn));
    opening.open(connTransport(conn), leftover);
  } catch (e) {
    const t = conn === null ? undefined : connTransport(conn);
    opening.abort(e instanceof Error ? e.message : String(e), t);
  }
}

/** The server's response head (latin1) and the bytes read after it. */
async function readHead(
  conn: Deno.Conn,
): Promise<{ head: string; leftover: Uint8Array }> {
  const buf = new Uint8Array(HEAD_BYTES_MAX);
  let len = 0;
  while (len < buf.length) {
    const n = await conn.read(buf.subarray(len));
    if (n === null) throw new Error("server closed during the handshake");
    const from = Math.max(0, len - 3);
    len += n;
    const end = headEnd(buf, from, len);
    if (end >= 0) {
      return { head: latin1(buf, 0, end), leftover: buf.slice(end, len) };
    }
  }
  throw new Error("server response head too large");
}
