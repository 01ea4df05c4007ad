// One request and its response over a pooled keep-alive connection: the
// worker's HTTP/1.1 client (issue 18), in place of node:http's ClientRequest,
// Agent and IncomingMessage for http: backends. It costs a fraction of their
// CPU per request and per read (bench/README.md, "Worker's HTTP/1.1 client").
//
// What the caller sees is what it saw of node:http in Deno 2.9:
//
// - `failed("unreachable", message)` before the response head: refused,
//   reset or closed ("socket hang up");
// - `response` with the status and the headers node would have built, then
//   `data` (body bytes, split as they arrive) and `end`;
// - after the head, `failed("broken", …)` when the body is cut short (the
//   backend closed mid-answer) and `failed("unreachable", …)` when the socket
//   fails (node emits the socket's error on the request then);
// - `failed("invalid", "Parse Error: …")`, head or no head, when the backend's
//   bytes are not HTTP/1.1 (issue 24.5, C61: the backend is up, its answer is
//   wrong; node reports these as errors like any other).
//
// Where node differs, on purpose (issue 24.5, C61): bytes after a complete
// message (a Content-Length too short, `0\r\n\r\nGARBAGE`) are not parsed as
// a next response that fails the request: the answer is delivered and the
// connection closed, never reused, since nothing it carries next can be
// trusted.
//
// No request is ever sent twice by this client (issue 24.7, C63). A POST is
// resent only when no byte of it can have reached the backend, which is Go's
// rule for non-idempotent requests (net/http: only a "nothing written"
// error), and node's (its Agent never resends). An idle connection the
// backend has closed is never used: it leaves the pool when its FIN or reset
// arrives, and one found closed or half-closed when taken is skipped before
// any byte is written (connection_pool.ts). Once the request is written, a
// close or reset before the response head (a stale keep-alive socket, or a
// backend that read the request and died) is `failed("unreachable")`: the
// worker reports backend_unavailable and the server decides, with its
// requeue cap and its unavailability circuit, whether the request runs again.
// Deno's ClientRequest resent such a request up to 1 MiB (maybeRetryRequest)
// without knowing whether the backend had begun it; this client did too.
import {
  type Connection,
  type ConnectionUser,
  distrust,
  releaseConnection,
  takeConnection,
} from "./connection_pool.ts";
import { requestHead, type RequestTarget } from "./request_head.ts";
import {
  feed,
  finish,
  isParseError,
  newResponseParser,
  type ParserEvents,
  type ResponseHead,
  type ResponseParser,
} from "./response_parser.ts";

export type { RequestTarget } from "./request_head.ts";
export type { ResponseHead } from "./response_parser.ts";

/** What the caller hears of an exchange (never anything after `end` or `failed`). */
export type ExchangeEvents = {
  response(head: ResponseHead): void;
  data(bytes: Buffer): void;
  end(): void;
  failed(kind: FailureKind, message: string): void;
};

/** How an exchange failed (see the top of this file). */
export type FailureKind = "unreachable" | "broken" | "invalid";

/** What the caller can do to an exchange. */
export type Exchange = {
  /** Stops it: the connection is closed, no event follows. */
  destroy(): void;
  /** Holds `data` and `end` (and stops reading the socket) until `resume`. */
  pause(): void;
  resume(): void;
  isPaused(): boolean;
};

/** An empty write: its callback runs once every earlier write went out. */
const NOTHING = new Uint8Array(0);

/** Held while paused: body bytes, or the end of the message. */
type Held = Buffer | "end";

/**
 * Sends `method target` with `headers` (content-length among them) and
 * `body`, and reports the response to `events`. Throws TypeError, as
 * http.request does, for a method, path or header node would refuse.
 */
export function exchange(
  method: string,
  target: RequestTarget,
  headers: Record<string, string>,
  body: string | Uint8Array,
  events: ExchangeEvents,
): Exchange {
  // One write, head and body as one string: node's first write (and how it
  // encodes a header value beyond ASCII: as UTF-8, with the body). A body of
  // bytes (body-bytes-v1, issue 25) joins the head's bytes.
  const wire = typeof body === "string"
    ? requestHead(method, target, headers) + body
    : Buffer.concat([Buffer.from(requestHead(method, target, headers)), body]);
  let conn: Connection;
  let parser: ResponseParser;
  /** Over: completed, failed or destroyed; nothing more is reported. */
  let over = false;
  let paused = false;
  let held: Held[] = [];
  /** The socket took the whole request (node frees a socket only then). */
  let written = false;
  /** The message is complete; the connection waits for `written` to be freed. */
  let complete: ResponseHead | null = null;
  /** Bytes of the read that completed the message that follow it. */
  let after = 0;

  const parserEvents: ParserEvents = {
    head: (head) => {
      if (!over) events.response(head);
    },
    body: (bytes) => {
      if (over || bytes.length === 0) return;
      if (paused) held.push(bytes);
      else events.data(bytes);
    },
    complete: (rest) => {
      complete = parser.head;
      after = rest;
    },
  };

  /**
   * The message is complete: frees the connection and ends the body. Bytes
   * after the message in the same read are stray (no request is waiting for
   * them): the answer stands, the connection is closed (C61).
   */
  const completed = () => {
    if (after > 0) strayBytes();
    freeWhenDone();
    if (paused) held.push("end");
    else finishBody();
  };

  const finishBody = () => {
    if (over) return;
    over = true;
    events.end();
  };

  /** Closes the connection, unless it is already back in the pool (someone else's). */
  const drop = () => {
    if (conn.user !== user) return;
    conn.user = null;
    conn.socket.destroy();
  };

  /**
   * Bytes nobody asked for: this connection is closed once the answer is
   * read, and the backend is not trusted with reuse again (C62).
   */
  const strayBytes = () => {
    complete = { ...complete!, keepAlive: false };
    distrust(conn.origin, "bytes after a complete answer");
  };

  const fail = (kind: FailureKind, message: string) => {
    if (over) return;
    over = true;
    drop();
    events.failed(kind, message);
  };

  /** A failure before the response head: never resent (see the top). */
  const beforeHead = (message: string) => fail("unreachable", message);

  /** Hands the connection back once the response is read and the request written. */
  const freeWhenDone = () => {
    if (complete === null || conn.user !== user) return;
    if (!written) {
      // No callback on the request's write (issue 31: ~1.5 µs a request in
      // node's stream layer): nothing left queued means it went out. A
      // backend that answers before reading all of it (rare) is waited for
      // with an empty write, whose callback follows the request's.
      const mine = conn;
      if (mine.socket.writableLength > 0) {
        return void mine.socket.write(NOTHING, () => {
          if (conn !== mine) return;
          written = true;
          freeWhenDone();
        });
      }
      written = true;
    }
    if (complete.keepAlive) {
      const hint = complete.headers["keep-alive"];
      releaseConnection(conn, typeof hint === "string" ? hint : undefined);
    } else {
      conn.user = null;
      conn.socket.destroySoon();
    }
  };

  const user: ConnectionUser = {
    data: (bytes) => {
      // A later read after the complete message (the request still being
      // written, or its end held by a pause): stray too (C61).
      if (complete !== null) return strayBytes();
      try {
        feed(parser, bytes, parserEvents);
      } catch (e) {
        if (!isParseError(e)) throw e;
        // node emits the parser's error on the request, head or no head.
        return fail("invalid", e.message);
      }
      if (complete !== null) completed();
    },
    end: () => closed(),
    error: (e) => {
      if (parser.head === null) return beforeHead(e.message);
      if (complete === null) fail("unreachable", e.message);
    },
    close: () => closed(),
  };

  /**
   * The backend ended or closed the connection: a hang-up before the head, the
   * end of a close-delimited body, or an answer cut short.
   */
  const closed = () => {
    if (parser.head === null) return beforeHead("socket hang up");
    if (complete !== null) return;
    if (finish(parser, parserEvents)) completed();
    else cutShort();
  };

  const cutShort = () =>
    fail(
      "broken",
      "backend response failed: the backend closed the connection mid-answer",
    );

  const start = () => {
    conn = takeConnection(target.host, target.port);
    conn.user = user;
    parser = newResponseParser(method === "HEAD");
    written = false;
    complete = null;
    after = 0;
    conn.socket.write(wire);
  };
  start();

  return {
    destroy: () => {
      if (over) return;
      over = true;
      drop();
    },
    pause: () => {
      if (paused) return;
      paused = true;
      if (!over && conn.user === user) conn.socket.pause();
    },
    resume: () => {
      if (!paused) return;
      paused = false;
      const queue = held;
      held = [];
      for (let i = 0; i < queue.length; i++) {
        if (paused) {
          held = queue.slice(i).concat(held);
          return;
        }
        const h = queue[i]!;
        if (h === "end") finishBody();
        else if (!over) events.data(h);
      }
      if (!over && conn.user === user) conn.socket.resume();
    },
    isPaused: () => paused,
  };
}
