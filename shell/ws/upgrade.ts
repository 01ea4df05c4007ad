// An HTTP upgrade request held by its socket until the relay answers it: what
// the worker door (shell/server/worker_door/) and the peer links
// (shell/server/cluster/peer_link.ts) take from the client door. The door
// parses the request and fills in what it alone knows (the client's address,
// its connection count); the socket stays unanswered, watched for its close,
// until `reply`, `accept` or `destroy`.
//
// Its socket is a Deno.Conn from the door on Deno.listen; the bytes the door
// read past the head come along.
import { acceptOn, type AcceptOptions } from "./accept.ts";
import type { WsConnection, WsEvents } from "./connection.ts";
import type { HeaderRecord } from "./handshake.ts";
import { connTransport } from "./transport.ts";

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
  const t = connTransport(conn);
  // Bytes the peer sent before the answer (a WebSocket client sends none).
  let early = leftover;
  const gone = new Set<() => void>();
  t.read((bytes) => {
    if (early.length + bytes.length > EARLY_BYTES_MAX) return t.close();
    const joined = new Uint8Array(early.length + bytes.length);
    joined.set(early);
    joined.set(bytes, early.length);
    early = joined;
  }, () => {
    t.close();
    for (const fn of gone) fn();
    gone.clear();
  });
  return {
    ...head,
    reply(response) {
      gone.clear();
      const cut = setTimeout(() => t.close(), REPLY_LINGER_MS);
      // Read and dropped until the peer ends (its reads now go here).
      t.read(ignore, () => {
        clearTimeout(cut);
        t.close();
      });
      t.write(encoder.encode(response)).then(
        () => t.closeWrite(),
        () => t.close(),
      );
    },
    accept(opts, events) {
      gone.clear();
      // The connection takes the reads over (transport.ts): what was read
      // while the request waited goes first, and nothing of this upgrade
      // (its head, these closures) stays with the socket for its life.
      const bytes = early;
      early = EMPTY;
      return acceptOn(head, t, bytes, opts, events);
    },
    onGone: (fn) => {
      gone.add(fn);
      return () => gone.delete(fn);
    },
    destroy: () => t.close(),
  };
}

const EMPTY = new Uint8Array(0);

function ignore(): void {}
