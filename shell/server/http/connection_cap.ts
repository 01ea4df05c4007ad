// MAX_CONNECTIONS (issue 15): open client connections are counted; beyond the
// cap a new one is answered 503 with Retry-After and closed, so a crowd of idle
// or slow sockets cannot use up the process's file descriptors. A worker that
// presents the right secret leaves the count (it is authenticated, and without
// workers nothing is served); a refused worker upgrade is answered 503 too.
import type { HttpRequest, HttpResponse, Peer } from "../door/exchange.ts";
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
  /** Counts a new connection (the door's `opened`); over the cap it is marked, and cut if it sends nothing. */
  opened(peer: Peer): void;
  /** The door's `closed`: the connection leaves the count. */
  closed(peer: Peer): void;
  /** Answers 503 and returns true when this request's connection is over the cap. */
  refuseRequest(req: HttpRequest, res: HttpResponse): boolean;
  /** True when this upgrade's connection is over the cap (answer it yourself). */
  overCap(peer: Peer): boolean;
  /** Takes an authenticated worker's connection out of the count. */
  exempt(peer: Peer): void;
  open(): number;
};

export function capConnections(max: number): ConnectionCap {
  let open = 0;
  const counted = new WeakSet<Peer>();
  const over = new WeakSet<Peer>();
  const idleTimers = new WeakMap<Peer, ReturnType<typeof setTimeout>>();
  const uncount = (peer: Peer) => {
    if (counted.delete(peer)) open--;
    clearTimeout(idleTimers.get(peer));
  };
  return {
    opened(peer) {
      open++;
      counted.add(peer);
      if (open <= max) return;
      over.add(peer);
      idleTimers.set(peer, setTimeout(() => peer.destroy(), OVER_CAP_IDLE_MS));
    },
    closed: uncount,
    refuseRequest(req, res) {
      if (!over.has(req.socket)) return false;
      clearTimeout(idleTimers.get(req.socket));
      req.resume();
      closeAfterAnswer(res);
      const error = apiError("too_many_connections", { max });
      res.writeHead(error.status, errorHeaders(error));
      res.end(errorBody(errorShapeOf(req.url), error));
      return true;
    },
    overCap: (peer) => over.has(peer),
    exempt(peer) {
      uncount(peer);
      over.delete(peer);
    },
    open: () => open,
  };
}
