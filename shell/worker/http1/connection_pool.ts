// Keep-alive connections to backends, one pool per host:port, for the
// worker's HTTP/1.1 client (issue 18). The rules are node's keep-alive
// http.Agent's as Deno 2.9 implements it (_http_agent.js), so reuse behaves
// as it did with node:http:
//
// - idle connections are reused last-in first-out (the Agent's default
//   "lifo" scheduling: the warmest socket, the others may time out);
// - no limit on connections per host (maxSockets Infinity): no queueing;
// - an idle connection the backend closes (FIN, reset, error) leaves the pool
//   at once; one found closed or half-closed when taken is dropped, never used;
// - a backend's `Keep-Alive: timeout=N` hint with N ≤ 1 s closes the
//   connection instead of pooling it (the Agent's keepSocketAlive; with no
//   Agent `timeout`, a longer hint sets no idle timer there either);
// - idle connections are unref'd (they keep no process alive) and have TCP
//   keep-alive on (1 s), as the Agent's.
//
// Where it differs from the Agent, on purpose (issue 24.6, C62): a backend
// that sends bytes nobody asked for (on an idle connection, or after a
// complete answer) has answered some request twice, and HTTP/1.1 cannot tell
// such a late answer from the real one once the next request is on its way.
// So the connection is closed, and the backend is no longer trusted with
// reuse at all: every later request to it gets a connection of its own, for
// as long as the worker runs (a log line says so, once).
//
// Each socket gets its listeners once, at creation; they pass events on to
// whoever uses the connection (`user`): adding and removing listeners per
// request is part of what made node:http's per-request cost (issue 18).
import net from "node:net";

/** What one request on a connection wants to hear of it. */
export type ConnectionUser = {
  data(bytes: Buffer): void;
  /** The backend ended its side (FIN). */
  end(): void;
  error(e: Error): void;
  /** The socket is closed; after `end` or `error`, or after a destroy. */
  close(): void;
};

/** One connection to a backend. */
export type Connection = {
  socket: net.Socket;
  /** Its pool's key, "host:port". */
  origin: string;
  /** The request using it; null while idle. */
  user: ConnectionUser | null;
  /** Whether it carried a request before this one (a stale socket is possible). */
  reused: boolean;
};

/** node's Agent `keepAliveMsecs` default: TCP keep-alive probes after 1 s idle. */
const TCP_KEEPALIVE_MS = 1000;
/** The Agent's `agentKeepAliveTimeoutBuffer`: close 1 s before the backend would. */
const HINT_MARGIN_MS = 1000;
const HINT = /^timeout=(\d+)/;

const IDLE = new Map<string, Connection[]>();

/** Origins that sent bytes nobody asked for: never reused again (C62). */
const DISTRUSTED = new Set<string>();

/** Hears each origin's first unsolicited bytes (the worker logs them). */
let onDistrust: (origin: string, why: string) => void = () => {};

/** Sets who hears that an origin is no longer trusted with reuse. */
export function setDistrustListener(
  f: (origin: string, why: string) => void,
): void {
  onDistrust = f;
}

/** `origin` sent bytes nobody asked for: none of its connections is reused again. */
export function distrust(origin: string, why: string): void {
  if (DISTRUSTED.has(origin)) return;
  DISTRUSTED.add(origin);
  for (const conn of IDLE.get(origin) ?? []) conn.socket.destroy();
  IDLE.delete(origin);
  onDistrust(origin, why);
}

/** Whether connections to `host:port` are still reused (tests). */
export function reusesConnections(host: string, port: number): boolean {
  return !DISTRUSTED.has(`${host}:${port}`);
}

/** A connection to `host:port`: the last idle one that is still open, or a new one. */
export function takeConnection(host: string, port: number): Connection {
  const origin = `${host}:${port}`;
  const idle = IDLE.get(origin);
  while (idle !== undefined && idle.length > 0) {
    const conn = idle.pop()!;
    if (idle.length === 0) IDLE.delete(origin);
    if (conn.socket.destroyed || !conn.socket.writable) {
      conn.socket.destroy();
      continue;
    }
    conn.reused = true;
    conn.socket.ref();
    return conn;
  }
  return connect(host, port, origin);
}

function connect(host: string, port: number, origin: string): Connection {
  const socket = net.connect({ host, port });
  socket.setNoDelay(true);
  const conn: Connection = {
    socket,
    origin,
    user: null,
    reused: false,
  };
  socket.on("data", (b: Buffer) => {
    if (conn.user !== null) conn.user.data(b);
    else {
      // Nothing is owed on an idle connection: a backend that talks anyway
      // cannot be trusted with the next request (C62).
      socket.destroy();
      distrust(origin, "bytes on an idle keep-alive connection");
    }
  });
  socket.on("end", () => conn.user?.end());
  socket.on("error", (e: Error) => conn.user?.error(e));
  socket.on("close", () => {
    if (conn.user !== null) conn.user.close();
    else forget(conn);
  });
  return conn;
}

/**
 * Puts a connection whose exchange is over back in its pool, or closes it when
 * the backend's `keep-alive` hint leaves no time to reuse it.
 */
export function releaseConnection(
  conn: Connection,
  keepAliveHeader: string | undefined,
): void {
  conn.user = null;
  const socket = conn.socket;
  const hint = keepAliveHeader === undefined
    ? null
    : HINT.exec(keepAliveHeader);
  const hintTooShort = hint !== null &&
    Number(hint[1]) * 1000 - HINT_MARGIN_MS <= 0;
  if (
    socket.destroyed || !socket.writable || hintTooShort ||
    DISTRUSTED.has(conn.origin)
  ) {
    socket.destroy();
    return;
  }
  if (!conn.reused) socket.setKeepAlive(true, TCP_KEEPALIVE_MS);
  socket.unref();
  if (socket.isPaused()) socket.resume(); // to hear the backend close it
  const idle = IDLE.get(conn.origin);
  if (idle === undefined) IDLE.set(conn.origin, [conn]);
  else idle.push(conn);
}

/** Drops a closed connection from its pool. */
function forget(conn: Connection): void {
  const idle = IDLE.get(conn.origin);
  if (idle === undefined) return;
  const i = idle.indexOf(conn);
  if (i >= 0) idle.splice(i, 1);
  if (idle.length === 0) IDLE.delete(conn.origin);
}

/** How many idle connections the pool holds for `host:port` (tests). */
export function idleConnections(host: string, port: number): number {
  return IDLE.get(`${host}:${port}`)?.length ?? 0;
}

/** Closes every idle connection (tests, shutdown); tests forget distrust too. */
export function closeIdleConnections(forgetDistrust = false): void {
  for (const idle of [...IDLE.values()]) {
    for (const conn of [...idle]) conn.socket.destroy();
  }
  IDLE.clear();
  if (forgetDistrust) DISTRUSTED.clear();
}
