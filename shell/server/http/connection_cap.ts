// MAX_CONNECTIONS (issue 15): open client connections are counted; beyond the
// cap a new one is answered 503 with Retry-After and closed, so a crowd of idle
// or slow sockets cannot use up the process's file descriptors. A worker that
// presents the right secret leaves the count (it is authenticated, and without
// workers nothing is served); a refused worker upgrade is answered 503 too.
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { apiError, errorShapeOf } from "../../../core/mod.ts";
import { errorBody, errorHeaders } from "./errors.ts";
import { closeAfterAnswer } from "./http_reply.ts";

/** An over-cap socket that sends no request is not kept waiting for one. */
const OVER_CAP_IDLE_MS = 2000;

/** The soft open-file limit (Linux /proc), or null where it cannot be read. */
export function openFileLimit(): number | null {
  try {
    const text = Deno.readTextFileSync("/proc/self/limits");
    const m = /^Max open files\s+(\d+)/m.exec(text);
    return m === null ? null : Number(m[1]);
  } catch {
    return null;
  }
}

/**
 * MAX_CONNECTIONS=auto: 80% of the open-file limit, leaving the rest for
 * workers, the database and the runtime; 1024 where the limit is unknown.
 */
export function defaultMaxConnections(): number {
  const limit = openFileLimit();
  return limit === null ? 1024 : Math.max(1, Math.floor(limit * 0.8));
}

export type ConnectionCap = {
  /** Answers 503 and returns true when this request's connection is over the cap. */
  refuseRequest(req: IncomingMessage, res: ServerResponse): boolean;
  /** True when this upgrade's connection is over the cap (answer it yourself). */
  overCap(socket: Duplex): boolean;
  /** Takes an authenticated worker's connection out of the count. */
  exempt(socket: Duplex): void;
  open(): number;
};

export function capConnections(server: Server, max: number): ConnectionCap {
  let open = 0;
  const counted = new WeakSet<Duplex>();
  const over = new WeakSet<Duplex>();
  const idleTimers = new WeakMap<Duplex, ReturnType<typeof setTimeout>>();
  // One listener function for every socket, not a closure each (issue 18); a
  // socket closes once, so `on` does what `once` would without its wrapper.
  function uncount(this: Duplex): void {
    if (counted.delete(this)) open--;
  }
  server.on("connection", (socket: Socket) => {
    open++;
    counted.add(socket);
    socket.on("close", uncount);
    if (open <= max) return;
    over.add(socket);
    const idle = setTimeout(() => socket.destroy(), OVER_CAP_IDLE_MS);
    idleTimers.set(socket, idle);
    socket.once("close", () => clearTimeout(idle));
  });
  return {
    refuseRequest(req, res) {
      if (!over.has(req.socket)) return false;
      req.resume();
      closeAfterAnswer(res);
      const error = apiError("too_many_connections", { max });
      res.writeHead(error.status, errorHeaders(error));
      res.end(errorBody(errorShapeOf(req.url ?? null), error));
      return true;
    },
    overCap: (socket) => over.has(socket),
    exempt(socket) {
      if (counted.delete(socket)) open--;
      over.delete(socket);
      clearTimeout(idleTimers.get(socket));
    },
    open: () => open,
  };
}
