// WebSocket frames sent to one peer during one event-loop turn leave in one
// socket write (issue 10, measured in bench/README.md): a loopback write costs
// ~20 µs whatever its size, and a burst of requests (or of backend reads) used
// to make one write per frame. The first frame of a turn corks the peer's TCP
// socket; a setImmediate at the end of the turn uncorks every corked socket, so
// no frame waits for a later turn. Frames and their order are unchanged: `ws`
// still writes each frame whole, they only share the syscall.
//
// The socket is the one node:http handed over for the upgrade (server: the
// `upgrade` event's socket; worker: the `upgrade` response's socket), so no `ws`
// internals are touched.

/** What batching needs of a socket: node:stream Writable's cork/uncork. */
export type Corkable = { cork(): void; uncork(): void };

export type FrameBatcher = {
  /** Cork `socket` until the end of this event-loop turn (once per turn). */
  hold(socket: Corkable): void;
};

export function makeFrameBatcher(): FrameBatcher {
  const corked = new Set<Corkable>();
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    for (const socket of corked) {
      try {
        socket.uncork();
      } catch {
        // A destroyed socket has nothing left to write; the others still flush.
      }
    }
    corked.clear();
  };
  return {
    hold(socket) {
      if (corked.has(socket)) return;
      socket.cork();
      corked.add(socket);
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    },
  };
}
