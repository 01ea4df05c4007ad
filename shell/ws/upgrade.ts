// An HTTP upgrade request held by its socket until the relay answers it: what
// the worker door (shell/server/worker_door/) and the peer links
// (shell/server/cluster/peer_link.ts) take from the client door. The door
// parses the request and fills in what it alone knows (the client's address,
// its connection count); the socket stays unanswered, watched for its close,
// until `reply`, `accept` or `destroy`.
//
// Two sockets carry it: a Deno.Conn (the door on Deno.listen: the bytes it
// read past the head come along) and, while the door is node:http, the
// net.Socket of its `upgrade` event (with its `head` bytes).
import type { Duplex } from "node:stream";
import { acceptOn, type AcceptOptions } from "./accept.ts";
import type { WsConnection, WsEvents } from "./connection.ts";
import type { HeaderRecord } from "./handshake.ts";
import { nodeSocketTransport } from "./node_socket.ts";
import { connTransport, type Transport } from "./transport.ts";

/** What the door knows of an upgrade request. */
export type UpgradeHead = {
  method: string;
  /** The request target: path and query, as sent. */
  url: string;
  /** Lower-case names. */
  headers: HeaderRecord;
  /** The client's address, TRUSTED_PROXIES applied (clientAddress). */
  clientIp: string;
  /** Whether this connection is over MAX_CONNECTIONS (answer it 503). */
  overCap(): boolean;
  /** Takes this connection out of the door's count (an authenticated worker). */
  exempt(): void;
};

export type Upgrade = UpgradeHead & {
  /** Writes a whole HTTP/1.1 response (head and body), then ends the socket. */
  reply(response: string): void;
  /** Answers 101 and opens the connection; null when not a valid upgrade (answered 400). */
  accept(opts: AcceptOptions, events: WsEvents): WsConnection | null;
  /** Calls `fn` if the socket closes before it is answered; returns the call that forgets `fn`. */
  onGone(fn: () => void): () => void;
  /** Cuts the socket now. */
  destroy(): void;
};

/** Bytes a held socket may send before it is answered (a WebSocket client sends none). */
const EARLY_BYTES_MAX = 64 * 1024;
/** After `reply`, how long the peer has to end the socket before it is cut. */
const REPLY_LINGER_MS = 2000;

const encoder = new TextEncoder();

/**
 * An upgrade on a Deno.Conn; `leftover` is what the door read past the
 * request head. The socket is read from now on: its end is noticed while the
 * request waits for its answer.
 */
export function upgradeOnConn(
  head: UpgradeHead,
  conn: Deno.Conn,
  leftover: Uint8Array,
): Upgrade {
  try {
    (conn as Deno.TcpConn).setNoDelay(true);
  } catch {
    // Not TCP, or closed already: the read side reports it.
  }
  const base = connTransport(conn);
  const early: Uint8Array[] = [leftover];
  let earlyBytes = leftover.length;
  let ended = false;
  let sink: ((bytes: Uint8Array) => void) | null = null;
  let endSink: (() => void) | null = null;
  const gone = new Set<() => void>();
  base.read((bytes) => {
    if (sink !== null) return sink(bytes);
    earlyBytes += bytes.length;
    if (earlyBytes > EARLY_BYTES_MAX) return base.close();
    early.push(bytes.slice());
  }, () => {
    ended = true;
    base.close();
    if (endSink !== null) return endSink();
    for (const fn of gone) fn();
    gone.clear();
  });
  // The reads already under way, handed to whoever reads next.
  const held: Transport = {
    ...base,
    read(onData, onEnd) {
      for (const bytes of early.splice(0)) onData(bytes);
      if (ended) return onEnd();
      sink = onData;
      endSink = onEnd;
    },
  };
  return {
    ...head,
    reply(response) {
      gone.clear();
      const cut = setTimeout(() => base.close(), REPLY_LINGER_MS);
      held.read(() => {}, () => clearTimeout(cut));
      base.write(encoder.encode(response)).then(
        () => base.closeWrite(),
        () => base.close(),
      );
    },
    accept(opts, events) {
      gone.clear();
      return acceptOn(head, held, new Uint8Array(0), opts, events);
    },
    onGone: (fn) => {
      gone.add(fn);
      return () => gone.delete(fn);
    },
    destroy: () => base.close(),
  };
}

/** An upgrade on node:http's `upgrade` socket and its `head` bytes. */
export function upgradeOnNodeSocket(
  head: UpgradeHead,
  socket: Duplex,
  bytes: Uint8Array,
): Upgrade {
  (socket as Duplex & { setNoDelay?: (on: boolean) => void }).setNoDelay?.(
    true,
  );
  // A reset before the answer: the socket closes, nothing to tell.
  socket.on("error", ignore);
  return {
    ...head,
    reply(response) {
      socket.end(response);
    },
    accept: (opts, events) =>
      acceptOn(head, nodeSocketTransport(socket), bytes, opts, events),
    onGone(fn) {
      socket.once("close", fn);
      return () => socket.off("close", fn);
    },
    destroy: () => socket.destroy(),
  };
}

function ignore(): void {}
