// One client connection on the door (issue 31): reads, parses requests one at
// a time, hands each to the routes, and writes the answers.
//
// - Always reading: a client that leaves (EOF or reset) is noticed at once,
//   queued or mid-body or mid-stream alike (C46), and its response closes.
// - One exchange at a time: a pipelined request is held (read, not parsed)
//   until the answer before it has ended, so answers leave in order. Past
//   HOLD_BYTES_MAX of held input the connection stops reading until then.
// - Writes: everything queued in one turn (heads, chunks, several answers)
//   leaves in one socket write; one write in flight at a time.
// - An answer that ends before its request's body has all arrived is the
//   connection's last (what node:http did with closeIfBodyUnread, issue 15):
//   no unread body is ever parsed as the next request.
// - Ending: after a last answer, our FIN, then the client has LINGER_MS to
//   close before the socket is cut; its input meanwhile is read and dropped
//   (a close with unread input sends a reset that can discard the answer).
import { Buffer } from "node:buffer";
import { LINGER_MS } from "../linger.ts";
import { spareBuffers } from "../../spare_buffers.ts";
import { HttpRequest, HttpResponse, type Peer, type Wire } from "./exchange.ts";
import {
  feed,
  isIdle,
  newRequestParser,
  type ParseEvents,
  type ParseFailure,
  type RequestHead,
  RequestParseError,
  type RequestParser,
  resetParser,
} from "./request_parser.ts";

/** What the door does with what arrives; a throw is the handler's own bug (it is cut). */
export type DoorHandlers = {
  request(req: HttpRequest, res: HttpResponse): void;
  /**
   * An upgrade (WebSocket) request: the connection is the handler's from here,
   * with the bytes read after the head; `closed` must be called once it closes.
   */
  upgrade(
    req: HttpRequest,
    conn: Deno.TcpConn,
    head: Uint8Array,
    closed: () => void,
  ): void;
  /** The whole answer (head and body) to a request that could not be parsed. */
  unparsable(failure: ParseFailure, start: string): string;
  /** Each connection as it opens and once it has closed (the connection cap). */
  opened?(peer: Peer): void;
  closed?(peer: Peer): void;
};

/**
 * Read buffers: a small one while nothing is expected but the client's leaving
 * or its next request (an open stream or an idle keep-alive connection holds
 * only this), a larger one while a request's head or body is coming.
 */
const WAITING_READ_BYTES = 1024;
const READING_READ_BYTES = 16 * 1024;
/**
 * Large read buffers let go between requests, at most 16 kept for the next
 * request on any connection (shell/spare_buffers.ts). Nothing read into one
 * outlives its parse (bodies, held input and an upgrade's bytes are copied
 * out), so a buffer given back is free.
 */
const readBuffers = spareBuffers(READING_READ_BYTES, 16);

/** Pipelined input held while an answer is pending; beyond it reading pauses. */
const HOLD_BYTES_MAX = 64 * 1024;
const CONTINUE = "HTTP/1.1 100 Continue\r\n\r\n";

export type Connection = {
  conn: Deno.TcpConn;
  peer: Peer;
  handlers: DoorHandlers;
  parser: RequestParser;
  events: ParseEvents;
  wire: Wire;
  req: HttpRequest | null;
  res: HttpResponse | null;
  /** Input after a complete request whose answer has not ended. */
  held: Uint8Array | null;
  /** Reading stopped until the held input is taken. */
  paused: (() => void) | null;
  out: (string | Uint8Array)[];
  outBytes: number;
  /** Bytes of the write in flight. */
  flight: number;
  /** Answers whose last bytes are in `out`. */
  ending: HttpResponse[];
  writing: boolean;
  scheduled: boolean;
  /** No request after the current one: the connection ends once `out` is written. */
  last: boolean;
  /** A head just read, not yet handed to the routes. */
  fresh: RequestHead | null;
  eof: boolean;
  state: "open" | "lingering" | "closed" | "handedOff";
  /** When it began waiting for a request (ms, Date.now), 0 while one is served. */
  waitingSince: number;
  lingerTimer: ReturnType<typeof setTimeout> | undefined;
  forget: () => void;
};

/** Serves `conn` until it closes; `forget` is called once it is closed or handed off. */
export function serveConnection(
  conn: Deno.TcpConn,
  handlers: DoorHandlers,
  forget: () => void,
): Connection {
  try {
    conn.setNoDelay(true);
  } catch {
    // already closed: the first read says so
  }
  const c = {
    conn,
    handlers,
    parser: newRequestParser(),
    req: null,
    res: null,
    held: null,
    paused: null,
    out: [],
    outBytes: 0,
    flight: 0,
    ending: [],
    writing: false,
    scheduled: false,
    last: false,
    fresh: null,
    eof: false,
    state: "open",
    waitingSince: Date.now(),
    lingerTimer: undefined,
    forget,
  } as unknown as Connection;
  c.peer = {
    remoteAddress: (conn.remoteAddr as Deno.NetAddr).hostname,
    destroy: () => destroy(c),
  };
  c.events = {
    head: (head) => onHead(c, head),
    body: (bytes) => c.req?.push(bytes),
    complete: () => onComplete(c),
  };
  c.wire = {
    send: (part, bytes) => send(c, part, bytes),
    buffered: () => c.outBytes + c.flight,
    ended: (res, keepAlive) => onEnded(c, res, keepAlive),
    destroy: () => destroy(c),
  };
  handlers.opened?.(c.peer);
  void readLoop(c);
  return c;
}

async function readLoop(c: Connection): Promise<void> {
  const waiting = new Uint8Array(WAITING_READ_BYTES);
  let reading: Uint8Array | null = null;
  try {
    while (c.state === "open" || c.state === "lingering") {
      if (c.paused !== null) {
        await new Promise<void>((r) => c.paused = r);
        continue;
      }
      // Let go of the large buffer between requests.
      const midRequest = c.req !== null ? !c.req.complete : !isIdle(c.parser);
      if (!midRequest && reading !== null) {
        readBuffers.give(reading);
        reading = null;
      }
      const buf = midRequest ? (reading ??= readBuffers.take()) : waiting;
      let n: number | null;
      try {
        n = await c.conn.read(buf);
      } catch {
        n = null;
      }
      if (gone(c)) return;
      if (n === null) return onEof(c);
      if (c.state === "open") parseInput(c, buf.subarray(0, n));
    }
  } finally {
    // No read is pending here: the loop only ends after one returned.
    if (reading !== null) readBuffers.give(reading);
  }
}

function parseInput(c: Connection, bytes: Uint8Array): void {
  parseBytes(c, bytes);
  c.req?.firstReadDone();
}

function parseBytes(c: Connection, bytes: Uint8Array): void {
  let at = 0;
  while (at < bytes.length) {
    if (c.state !== "open" || c.last) return; // dropped: nothing more is served
    if (c.req !== null && c.req.complete) return hold(c, bytes.subarray(at));
    try {
      at = feed(c.parser, bytes, at, c.events);
    } catch (e) {
      if (e instanceof RequestParseError) return unparsable(c, e);
      destroy(c);
      throw e;
    }
    const head = c.fresh;
    if (head !== null) {
      c.fresh = null;
      dispatch(c, head, bytes.subarray(at));
      if (head.upgrade) return;
    }
  }
}

function hold(c: Connection, bytes: Uint8Array): void {
  if (c.held === null) c.held = bytes.slice();
  else {
    const joined = new Uint8Array(c.held.length + bytes.length);
    joined.set(c.held);
    joined.set(bytes, c.held.length);
    c.held = joined;
  }
  if (c.held.length > HOLD_BYTES_MAX) c.paused = () => {};
}

/** A head was read: the exchange is made now, handed to the routes once the parser has returned. */
function onHead(c: Connection, head: RequestHead): void {
  const req = new HttpRequest(head, c.peer);
  c.req = req;
  c.res = new HttpResponse(req, c.wire);
  c.waitingSince = 0;
  c.fresh = head;
}

/** The new exchange to its handler: an upgrade, 100-continue or 417 first. */
function dispatch(c: Connection, head: RequestHead, rest: Uint8Array): void {
  const req = c.req!;
  const res = c.res!;
  if (head.upgrade) return handOff(c, rest);
  if (head.expect === "continue") send(c, CONTINUE, CONTINUE.length);
  else if (head.expect === "other") {
    // node:http's answer to an expectation it cannot meet.
    req.resume();
    res.writeHead(417);
    res.end();
    return;
  }
  c.handlers.request(req, res);
}

function onComplete(c: Connection): void {
  const req = c.req;
  if (req === null) return;
  req.finish();
  if (c.res?.writableEnded === true) nextExchange(c);
}

function onEnded(c: Connection, res: HttpResponse, keepAlive: boolean): void {
  c.ending.push(res);
  if (!keepAlive) c.last = true;
  // An ended answer has all its bytes queued: they leave now, not after the
  // rest of the turn (issue 31: added latency at concurrency 1). No later
  // byte of this connection can join them in this turn: the next request is
  // parsed in a microtask at the earliest (nextExchange).
  if (c.writing) schedule(c);
  else void flush(c);
  if (res !== c.res) return;
  if (res.req.complete) nextExchange(c);
  // The body still coming is dropped: the answer no longer wants it.
  else res.req.resume();
}

/** The current exchange is over: the next request may be read. */
function nextExchange(c: Connection): void {
  c.req = null;
  c.res = null;
  resetParser(c.parser);
  if (c.held === null) {
    c.waitingSince = Date.now();
    return;
  }
  // Not inside the route's res.end(): the next request starts in a microtask.
  queueMicrotask(() => {
    const held = c.held;
    c.held = null;
    const resume = c.paused;
    c.paused = null;
    resume?.();
    if (held !== null && c.state === "open") parseInput(c, held);
    if (c.req === null && c.state === "open") c.waitingSince = Date.now();
  });
}

function unparsable(c: Connection, e: RequestParseError): void {
  const started = c.res !== null && c.res.headersSent;
  if (started) return destroy(c);
  // The route's request and response (a body that broke mid-way) are over.
  c.req?.abort();
  c.res?.closed();
  c.req = null;
  c.res = null;
  const answer = c.handlers.unparsable(e.failure, e.start);
  send(c, answer, Buffer.byteLength(answer));
  c.last = true;
}

function handOff(c: Connection, rest: Uint8Array): void {
  c.state = "handedOff";
  c.waitingSince = 0;
  c.forget();
  const req = c.req!;
  c.req = null;
  c.res = null;
  // Nothing of the door's connection is kept for the WebSocket's life (issue
  // 31: memory per idle worker): its peer closes the socket itself from now.
  const { conn, peer, handlers } = c;
  peer.destroy = () => closeQuietly(conn);
  try {
    handlers.upgrade(req, conn, rest.slice(), () => handlers.closed?.(peer));
  } catch (e) {
    closeQuietly(conn);
    handlers.closed?.(peer);
    throw e;
  }
}

/** The client's side ended (EOF or reset). */
function onEof(c: Connection): void {
  c.eof = true;
  // A request without its answer yet: the client left, the request is cancelled.
  if (c.state !== "open" || (c.req !== null && c.res?.writableEnded !== true)) {
    return destroy(c);
  }
  c.last = true;
  settle(c);
}

function send(c: Connection, part: string | Uint8Array, bytes: number): void {
  if (c.state === "closed") return;
  c.out.push(part);
  c.outBytes += bytes;
  schedule(c);
}

function schedule(c: Connection): void {
  if (c.scheduled || c.writing) return;
  c.scheduled = true;
  queueMicrotask(() => {
    c.scheduled = false;
    void flush(c);
  });
}

const encoder = new TextEncoder();

/**
 * The door's own slab for small outputs: a turn's output is cut from it, and
 * no byte of it is ever handed out twice, so an output stays as written until
 * its write is done. Issue 31: an ArrayBuffer of its own per write cost ~1
 * µs; Buffer's shared pool (8 KiB) made a new one every few answers and a
 * Buffer object for each; a view of a 64 KiB slab is one `subarray`.
 */
const SLAB_BYTES = 64 * 1024;
/** Outputs this large or larger get their own buffer. */
const SLAB_PART_MAX = 4 * 1024;
let slab = new Uint8Array(0);
let slabAt = 0;

function outputBuffer(bytes: number): Uint8Array {
  if (bytes >= SLAB_PART_MAX) return Buffer.allocUnsafe(bytes);
  if (slabAt + bytes > slab.length) {
    slab = new Uint8Array(SLAB_BYTES);
    slabAt = 0;
  }
  const out = slab.subarray(slabAt, slabAt + bytes);
  slabAt += bytes;
  return out;
}

/**
 * Parts queued in one turn as one buffer (`bytes` long), from the door's slab
 * when small (outputBuffer). Text next to text is joined and encoded at once:
 * one `encodeInto` a part was slower than the old single `encode` once a turn
 * held a few chunks.
 */
function join(parts: (string | Uint8Array)[], bytes: number): Uint8Array {
  const first = parts[0]!;
  if (parts.length === 1 && typeof first !== "string") return first;
  const out = outputBuffer(bytes);
  let at = 0;
  let text = "";
  for (const p of parts) {
    if (typeof p === "string") text += p;
    else {
      if (text !== "") {
        at += encoder.encodeInto(text, out.subarray(at)).written;
        text = "";
      }
      out.set(p, at);
      at += p.length;
    }
  }
  if (text !== "") {
    at += encoder.encodeInto(text, at === 0 ? out : out.subarray(at)).written;
  }
  // Never the pool's bytes beyond what was written.
  return at === bytes ? out : out.subarray(0, at);
}

async function flush(c: Connection): Promise<void> {
  if (c.writing) return;
  while (c.out.length > 0) {
    if (c.state === "closed" || c.state === "handedOff") return;
    const data = join(c.out, c.outBytes);
    const done = c.ending;
    c.flight = c.outBytes;
    c.out = [];
    c.outBytes = 0;
    c.ending = [];
    c.writing = true;
    try {
      let at = 0;
      while (at < data.length) {
        at += await c.conn.write(at === 0 ? data : data.subarray(at));
      }
    } catch {
      c.writing = false;
      return destroy(c);
    }
    c.writing = false;
    c.flight = 0;
    if (gone(c)) return;
    for (const res of done) {
      if (!res.req.complete) c.last = true;
      res.finished();
    }
  }
  c.res?.drained();
  settle(c);
}

/** Ends a connection that has nothing left to do. */
function settle(c: Connection): void {
  if (!c.last || c.writing || c.out.length > 0 || c.state !== "open") return;
  if (c.req !== null && c.res?.writableEnded !== true) return;
  if (c.eof) return destroy(c);
  c.state = "lingering";
  c.conn.closeWrite().catch(() => {});
  c.lingerTimer = setTimeout(() => destroy(c), LINGER_MS);
}

/** Cuts the connection; every answer not yet out closes unfinished. */
export function destroy(c: Connection): void {
  if (c.state === "closed" || c.state === "handedOff") return;
  c.state = "closed";
  clearTimeout(c.lingerTimer);
  closeQuietly(c.conn);
  c.paused?.();
  c.paused = null;
  c.held = null;
  c.out = [];
  c.req?.abort();
  for (const res of c.ending) res.closed();
  c.res?.closed();
  c.ending = [];
  c.forget();
  c.handlers.closed?.(c.peer);
}

/** Closed, or no longer the door's (await hides this from narrowing). */
function gone(c: Connection): boolean {
  return c.state === "closed" || c.state === "handedOff";
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch {
    // already closed
  }
}
