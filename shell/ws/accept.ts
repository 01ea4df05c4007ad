// The server's side of an upgrade (issue 31): given the parsed request, the
// socket and the bytes read past the request head, answers 101 itself and
// returns an open connection; or answers 400 when the request is not an
// upgrade we take. The socket is a Deno.Conn (the client door on Deno.listen)
// or, while the door is node:http, the net.Socket of its `upgrade` event.
import type { Duplex } from "node:stream";
import type { IncomingMessage } from "node:http";
import {
  type ConnectionOptions,
  makeConnection,
  type WsConnection,
  type WsEvents,
} from "./connection.ts";
import {
  badRequest,
  switchingProtocols,
  upgradeProblem,
  type UpgradeRequest,
} from "./handshake.ts";
import { nodeSocketTransport } from "./node_socket.ts";
import { connTransport, type Transport } from "./transport.ts";

export type AcceptOptions = Omit<ConnectionOptions, "role">;

const encoder = new TextEncoder();

/**
 * Completes the handshake on `transport`: the 101 answer leaves in the same
 * write as the first frames sent on the returned connection (a refusal's
 * close frame with it). Null when `req` is not a valid upgrade: it was
 * answered 400 and the socket ended.
 */
export function acceptOn(
  req: UpgradeRequest,
  transport: Transport,
  leftover: Uint8Array,
  opts: AcceptOptions,
  events: WsEvents,
): WsConnection | null {
  const problem = upgradeProblem(req);
  if (problem !== null) {
    transport.write(encoder.encode(badRequest(problem))).then(
      () => transport.closeWrite(),
      () => transport.close(),
    );
    // Read and dropped until the peer ends; a peer that never does is the
    // caller's to cut (it holds nothing of ours).
    transport.read(() => {}, () => transport.close());
    return null;
  }
  const opening = makeConnection({ ...opts, role: "server" }, events);
  const key = req.header("sec-websocket-key")!;
  opening.open(transport, leftover, encoder.encode(switchingProtocols(key)));
  return opening.connection;
}

/** acceptOn for a Deno.Conn (the door on Deno.listen hands the bytes read past the head). */
export function acceptConn(
  req: UpgradeRequest,
  conn: Deno.Conn,
  leftover: Uint8Array,
  opts: AcceptOptions,
  events: WsEvents,
): WsConnection | null {
  if (conn.remoteAddr.transport === "tcp") {
    try {
      (conn as Deno.TcpConn).setNoDelay(true);
    } catch {
      // Already closed: the read side reports it.
    }
  }
  return acceptOn(req, connTransport(conn), leftover, opts, events);
}

/** acceptOn for node:http's `upgrade` event (its socket and `head` bytes). */
export function acceptNodeUpgrade(
  req: IncomingMessage,
  socket: Duplex,
  head: Uint8Array,
  opts: AcceptOptions,
  events: WsEvents,
): WsConnection | null {
  (socket as Duplex & { setNoDelay?: (on: boolean) => void }).setNoDelay?.(
    true,
  );
  return acceptOn(
    { method: req.method ?? "", header: nodeHeader(req) },
    nodeSocketTransport(socket),
    head,
    opts,
    events,
  );
}

/** node:http's headers as a lookup (the first value of a repeated one). */
export function nodeHeader(req: IncomingMessage): UpgradeRequest["header"] {
  return (name) => {
    const v = req.headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
}
