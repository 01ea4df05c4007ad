// One request and its response on the client door (issue 31): the members the
// routes used of node:http's IncomingMessage and ServerResponse, and no more,
// over the door's own connection (connection.ts). Classes, not closures: two of
// them are made per request, and their methods are shared on the prototype.
import { Buffer } from "node:buffer";
import { Listeners } from "./listeners.ts";
import type { RequestHead, RequestHeaders } from "./request_parser.ts";
import { type Framing, renderHead } from "./response_head.ts";

/** The connection a request came on, as the routes see it. */
export type Peer = {
  /** The client's address as the socket reports it (client_address.ts reads it). */
  remoteAddress: string;
  /** Cuts the connection at once. */
  destroy(): void;
};

/** What a response needs of its connection. */
export type Wire = {
  /** Queues bytes to go out in this turn's write; `bytes` is their length on the wire. */
  send(part: string | Uint8Array, bytes: number): void;
  /** Bytes queued or being written, not yet taken by the kernel. */
  buffered(): number;
  /** The response is complete (all its bytes queued); `keepAlive` false: it is the connection's last. */
  ended(res: HttpResponse, keepAlive: boolean): void;
  destroy(): void;
};

/** A write returns false once this much waits for the client: the caller waits for "drain". */
export const HIGH_WATER_BYTES = 64 * 1024;

// No "error": the door reports a broken request as "close" (node's "error"
// needed a listener only so that it would not throw).
type RequestEvents = {
  data: Buffer;
  end: void;
  close: void;
};

export class HttpRequest extends Listeners<RequestEvents> {
  readonly method: string;
  /** The request target as sent. */
  readonly url: string;
  headers: RequestHeaders;
  readonly socket: Peer;
  /** The whole body has arrived. */
  complete = false;
  /** HTTP/1.0, and whether the client wants the connection kept. */
  readonly http10: boolean;
  readonly keepAlive: boolean;
  #queued: Buffer[] | null = null;
  #flowing = false;
  #discard = false;
  #endPending = false;
  /** The read that brought the head is still being parsed. */
  #firstRead = true;
  #onBodyPending: (() => void) | null = null;

  constructor(head: RequestHead, peer: Peer) {
    super();
    this.method = head.method;
    this.url = head.target;
    this.headers = head.headers;
    this.socket = peer;
    this.http10 = head.http10;
    this.keepAlive = head.keepAlive;
  }

  override on<K extends keyof RequestEvents>(
    event: K,
    fn: (arg: RequestEvents[K]) => void,
  ): this {
    super.on(event, fn);
    if (event === "data" && !this.#flowing) this.#startFlowing();
    return this;
  }

  /**
   * `fn` runs once if the body is still to come after the read that brought
   * the head (at once when that read is over): a body that came with its head,
   * almost every one, arms no timer (issue 31: a timer armed and cleared per
   * request was ~2.5% of the server's CPU).
   */
  whenBodyPending(fn: () => void): void {
    if (this.complete) return;
    if (this.#firstRead) this.#onBodyPending = fn;
    else fn();
  }

  /** The connection has parsed the read that brought the head. */
  firstReadDone(): void {
    if (!this.#firstRead) return;
    this.#firstRead = false;
    const fn = this.#onBodyPending;
    this.#onBodyPending = null;
    if (fn !== null && !this.complete) fn();
  }

  /** The body is not wanted: its bytes are dropped as they come. */
  resume(): void {
    if (!this.listening("data")) this.#discard = true;
    this.#queued = null;
    if (!this.#flowing) this.#startFlowing();
  }

  /** Body bytes (a view into the read buffer: copied if kept). */
  push(bytes: Uint8Array): void {
    if (this.#discard) return;
    // From Buffer's shared pool: a small body is not an ArrayBuffer of its own
    // (Buffer.from made one per chunk, ~0.9 µs where this is ~0.07, issue 31).
    const chunk = Buffer.allocUnsafe(bytes.length);
    chunk.set(bytes);
    if (this.#flowing && this.#queued === null) this.emit("data", chunk);
    else (this.#queued ??= []).push(chunk);
  }

  /** The body is complete. */
  finish(): void {
    this.complete = true;
    if (this.#flowing && this.#queued === null) this.emit("end", undefined);
    else this.#endPending = true;
  }

  /** The client left before the body was complete. */
  abort(): void {
    if (!this.complete) this.emit("close", undefined);
  }

  /** Like a node stream switched to flowing: what came before a listener is delivered in a later microtask. */
  #startFlowing(): void {
    this.#flowing = true;
    if (this.#queued === null && !this.#endPending) return;
    queueMicrotask(() => {
      const queued = this.#queued;
      this.#queued = null;
      if (!this.#discard) {
        for (const c of queued ?? []) this.emit("data", c);
      }
      if (this.#endPending) {
        this.#endPending = false;
        this.emit("end", undefined);
      }
    });
  }
}

type ResponseEvents = { finish: void; close: void; drain: void };

export class HttpResponse extends Listeners<ResponseEvents> {
  readonly req: HttpRequest;
  /** writeHead was called (node's meaning: the head is decided, maybe not yet written). */
  headersSent = false;
  writableEnded = false;
  #wire: Wire;
  #status = 200;
  #set: Record<string, string> | null = null;
  #headers: Record<string, string> | null = null;
  /** null until the head is written. */
  #framing: Framing | null = null;
  #keepAlive = true;
  #last = false;
  #closed = false;
  #wantsDrain = false;

  constructor(req: HttpRequest, wire: Wire) {
    super();
    this.req = req;
    this.#wire = wire;
  }

  /** Bytes waiting for the client on this connection. */
  get writableLength(): number {
    return this.#wire.buffered();
  }

  setHeader(name: string, value: string): this {
    (this.#set ??= {})[name.toLowerCase()] = value;
    return this;
  }

  writeHead(status: number, headers?: Record<string, string>): this {
    this.#status = status;
    this.headersSent = true;
    if (this.#set === null) this.#headers = headers ?? {};
    else {
      const merged = this.#set;
      for (const k in headers) merged[k.toLowerCase()] = headers[k]!;
      this.#headers = merged;
    }
    return this;
  }

  /** This answer is the connection's last: it closes once the answer is out. */
  closeAfter(): void {
    this.#last = true;
    if (this.#framing === null) this.setHeader("connection", "close");
  }

  /** Writes the head now if nothing else has. */
  flushHeaders(): void {
    if (this.#framing === null && !this.writableEnded) this.#writeHead(-1);
  }

  write(chunk: string | Uint8Array): boolean {
    if (this.writableEnded || this.#closed) return false;
    if (this.#framing === null) this.#writeHead(-1);
    this.#body(chunk, byteLength(chunk));
    const ok = this.#wire.buffered() < HIGH_WATER_BYTES;
    if (!ok) this.#wantsDrain = true;
    return ok;
  }

  /**
   * The last bytes, and the answer complete. `bytes`: the chunk's UTF-8
   * length when the caller has it already (issue 31: a whole answer's text
   * was measured three times, for its length, its head and its write).
   */
  end(chunk?: string | Uint8Array, bytes?: number): void {
    if (this.writableEnded || this.#closed) return;
    this.writableEnded = true;
    const n = chunk === undefined ? 0 : bytes ?? byteLength(chunk);
    if (this.#framing === null) this.#writeHead(n);
    if (chunk !== undefined) this.#body(chunk, n);
    if (this.#framing === "chunked") this.#wire.send("0\r\n\r\n", 5);
    this.#wire.ended(this, this.#keepAlive && !this.#last);
  }

  /** Cuts the connection: the client sees the response broken. */
  destroy(): void {
    this.#wire.destroy();
  }

  /** The connection wrote this response's last byte. */
  finished(): void {
    this.emit("finish", undefined);
    this.closed();
  }

  /** The connection is gone (after "finish", or instead of it). */
  closed(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.emit("close", undefined);
  }

  /** The connection's buffer emptied. */
  drained(): void {
    if (!this.#wantsDrain) return;
    this.#wantsDrain = false;
    this.emit("drain", undefined);
  }

  #writeHead(knownLength: number): void {
    const req = this.req;
    const status = this.#status;
    const head = renderHead({
      status,
      headers: this.#headers ?? this.#set ?? {},
      noBody: req.method === "HEAD" || status === 204 || status === 304 ||
        (status >= 100 && status < 200),
      knownLength,
      keepAlive: req.keepAlive && !this.#last,
      http11: !req.http10,
    });
    this.headersSent = true;
    this.#framing = head.framing;
    this.#keepAlive = head.keepAlive;
    // A head is latin1 on the wire (as node writes it); almost always ASCII.
    const text = head.text;
    if (isAscii(text)) this.#wire.send(text, text.length);
    else {
      const bytes = Buffer.from(text, "latin1");
      this.#wire.send(bytes, bytes.length);
    }
  }

  /** `n`: the chunk's length on the wire (UTF-8 bytes of a text). */
  #body(chunk: string | Uint8Array, n: number): void {
    const framing = this.#framing;
    if (framing === "none") return;
    if (n === 0) return;
    if (framing === "chunked") {
      const size = `${n.toString(16)}\r\n`;
      this.#wire.send(size, size.length);
      this.#wire.send(chunk, n);
      this.#wire.send("\r\n", 2);
    } else this.#wire.send(chunk, n);
  }
}

// deno-lint-ignore no-control-regex -- the ASCII range itself
const NON_ASCII = /[^\x00-\x7f]/;

function isAscii(s: string): boolean {
  return !NON_ASCII.test(s);
}

function byteLength(chunk: string | Uint8Array): number {
  return typeof chunk === "string"
    ? Buffer.byteLength(chunk, "utf8")
    : chunk.length;
}
