// The client door (issue 31): `Deno.listen` and our own HTTP/1.1
// (connection.ts), in place of node:http's server. Measured alone it costs
// less than half of node:http's CPU a request (bench/README.md, "Measuring the
// candidates"), and unlike `Deno.serve` it sees a client leave while its
// request waits in the queue (C46: denoland/deno #21653).
import {
  type Connection,
  destroy,
  type DoorHandlers,
  serveConnection,
} from "./connection.ts";
import { KEEP_ALIVE_MS } from "./response_head.ts";
import { LINGER_MS } from "../linger.ts";

export type { DoorHandlers };

export type Door = {
  port: number;
  /**
   * Stops listening and cuts every connection still served here; resolves
   * once the upgraded ones (WebSockets) have closed too, as node:http's
   * `server.close` waited for them: a worker's closing handshake is not cut
   * by the process exiting. At most UPGRADED_WAIT_MS.
   */
  close(): Promise<void>;
};

/** How long `close` waits for upgraded connections: their linger, and a margin. */
const UPGRADED_WAIT_MS = LINGER_MS + 1000;

/** How often idle connections are looked for: a kept connection lives KEEP_ALIVE_MS to this much more. */
const SWEEP_MS = 5000;

/** Listens on hostname:port (0 picks one); throws if it cannot. */
export function openDoor(
  hostname: string,
  port: number,
  handlers: DoorHandlers,
): Door {
  const listener = Deno.listen({ hostname, port, transport: "tcp" });
  const connections = new Set<Connection>();
  let open = true;
  // Upgraded connections still open, and the close waiting for them.
  let upgraded = 0;
  let allGone: (() => void) | null = null;
  const served: DoorHandlers = {
    ...handlers,
    upgrade(req, conn, head, closed) {
      upgraded++;
      let gone = false;
      const onClosed = () => {
        if (gone) return;
        gone = true;
        upgraded--;
        closed();
        if (upgraded === 0) allGone?.();
      };
      try {
        handlers.upgrade(req, conn, head, onClosed);
      } catch (e) {
        gone = true;
        upgraded--;
        throw e;
      }
    },
  };
  void (async () => {
    while (open) {
      let conn: Deno.TcpConn;
      try {
        conn = await listener.accept();
      } catch (e) {
        if (!open) return;
        // A connection that failed while being accepted; the listener goes on.
        if (e instanceof Deno.errors.BadResource) return;
        continue;
      }
      const c: Connection = serveConnection(
        conn,
        served,
        () => connections.delete(c),
      );
      if (c.state === "open") connections.add(c);
    }
  })();
  // Idle connections (no request for KEEP_ALIVE_MS, or a head that never
  // ends) are cut, as node:http's keepAliveTimeout and headersTimeout did.
  const sweep = setInterval(() => {
    const now = Date.now();
    for (const c of connections) {
      if (c.waitingSince > 0 && now - c.waitingSince > KEEP_ALIVE_MS) {
        destroy(c);
      }
    }
  }, SWEEP_MS);
  Deno.unrefTimer(sweep);
  return {
    port: (listener.addr as Deno.NetAddr).port,
    close() {
      open = false;
      clearInterval(sweep);
      try {
        listener.close();
      } catch {
        // already closed
      }
      for (const c of [...connections]) destroy(c);
      if (upgraded === 0) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, UPGRADED_WAIT_MS);
        allGone = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    },
  };
}
