// "Linger, then cut" (issue 34: one rule in one place): once the relay has
// ended its side of a connection (a FIN after an answer, a WebSocket close
// frame), the peer gets a while to read what we sent and to close in turn;
// one that does not is cut, so no refused or finished peer holds a socket.
// Used by the client door (http/http_reply.ts), the worker door
// (worker_door/worker_socket.ts) and the core's closeSocket (run_effects.ts).

/** How long a peer may linger after our end before its socket is cut. */
export const LINGER_MS = 2000;

/** Something that says when it closed: a net.Socket, a stream, a WebSocket. */
type Closes = { once(event: "close", listener: () => void): unknown };

/** Cuts `conn` with `cut` unless it closes within `ms` of now. */
export function cutAfterLinger(
  conn: Closes,
  cut: () => void,
  ms: number = LINGER_MS,
): void {
  const timer = setTimeout(cut, ms);
  conn.once("close", () => clearTimeout(timer));
}
