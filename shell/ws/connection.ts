// One WebSocket connection over a transport (transport.ts), either role: frames
// out, messages in, the closing handshake. Issue 31: frames queued during one
// event-loop turn leave in ONE write (a loopback write costs ~20 µs whatever
// its size), written straight into a reused buffer; writes are never
// concurrent; pings are answered with pongs. The codec is frame.ts.
import { randomFillSync } from "node:crypto";
import {
  applyMask,
  CLOSE_ABNORMAL,
  CLOSE_NO_CODE,
  closePayload,
  CONTROL_PAYLOAD_MAX,
  type FrameParser,
  headerLength,
  makeFrameParser,
  OP_BINARY,
  OP_CLOSE,
  OP_PONG,
  OP_TEXT,
  readMaskKey,
  type Received,
  writeHeader,
} from "./frame.ts";
import type { Transport } from "./transport.ts";

export type WsState = "connecting" | "open" | "closing" | "closed";

/** What a connection tells its owner; each called on the connection's own turn. */
export type WsEvents = {
  /** The handshake completed (a client; a server's connection starts open). */
  onOpen?: () => void;
  onText: (text: string) => void;
  onBinary: (bytes: Uint8Array) => void;
  /**
   * Once, when the socket is gone: the peer's close code and reason (1005 when
   * its close frame had none, 1006 when none came, or the code we failed it
   * with), and whether both close frames were exchanged.
   */
  onClose: (code: number, reason: string, wasClean: boolean) => void;
  /** Raw bytes read, before they are parsed (the worker door's pre-register cap). */
  onRead?: (bytes: number) => void;
};

export type WsConnection = {
  readonly state: WsState;
  /** Bytes queued and not yet written (frames sent while connecting included). */
  readonly bufferedAmount: number;
  /** Queued for this turn's write when connecting or open; dropped otherwise. */
  sendText(text: string): void;
  sendBinary(bytes: Uint8Array): void;
  /** A binary frame of `length` bytes that `fill` writes in place (no copy). */
  sendBinaryWith(length: number, fill: (into: Uint8Array) => void): void;
  /** Starts the closing handshake (`reason` cut to fit a control frame). */
  close(code: number, reason: string): void;
  /** Cuts the socket now; onClose follows on a later turn. */
  terminate(): void;
  /** Runs `listener` once the connection closed (linger.ts). */
  once(event: "close", listener: () => void): void;
  /** Largest message taken; larger closes with 1009. */
  maxPayload: number;
};

export type ConnectionOptions = {
  /** "client": our frames are masked, the peer's must not be; "server": the other way. */
  role: "client" | "server";
  maxPayload: number;
  /** After our close frame, how long the peer has to end the socket before it is cut (default 30 s, as `ws`). */
  closeTimeoutMs?: number;
};

/** The connection and the calls that drive its opening (client.ts, accept.ts). */
export type Opening = {
  connection: WsConnection;
  /**
   * Starts on `transport`: `preface` (a server's 101 head) leaves first, in
   * the same write as any frame already queued; `leftover` (bytes read past
   * the handshake, not reused by the caller) is parsed before the
   * transport's own, from the next microtask on.
   */
  open(transport: Transport, leftover: Uint8Array, preface?: Uint8Array): void;
  /** The handshake failed: closes with 1006 and `reason`. */
  abort(reason: string, transport?: Transport): void;
};

const encoder = new TextEncoder();
/**
 * The write buffer's smallest size; one at most KEEP_BYTES_MAX is kept for
 * the next turn, a larger one (a big frame, a busy turn) is dropped after its
 * write.
 */
const START_BYTES = 1024;
const KEEP_BYTES_MAX = 4 * 1024;

/**
 * Write buffers larger than KEEP_BYTES_MAX, back from their write, kept for
 * the next turn that needs one on any connection, at most SPARES_MAX of at
 * most SPARE_BYTES_MAX each (so never more than 1 MiB in all, and nothing
 * per idle connection). Issue 31: a frame over ~1.3 KB of text (a request
 * with a real prompt; its room is reserved at 3 bytes a character) took a
 * fresh zero-filled buffer every turn (~1.4 µs for 16 KiB, and its share of
 * the collector). A buffer here is free: its write has completed.
 */
const SPARES_MAX = 4;
const SPARE_BYTES_MAX = 256 * 1024;
const spares: Uint8Array<ArrayBuffer>[] = [];

/** A spare of at least `n` bytes, or null. */
function takeSpare(n: number): Uint8Array<ArrayBuffer> | null {
  for (let i = 0; i < spares.length; i++) {
    const b = spares[i]!;
    if (b.length < n) continue;
    spares[i] = spares[spares.length - 1]!;
    spares.pop();
    return b;
  }
  return null;
}

function giveSpare(b: Uint8Array<ArrayBuffer>): void {
  if (b.length > SPARE_BYTES_MAX) return;
  if (spares.length < SPARES_MAX) {
    spares.push(b);
    return;
  }
  // Full: the smallest makes room for a larger one.
  let smallest = 0;
  for (let i = 1; i < spares.length; i++) {
    if (spares[i]!.length < spares[smallest]!.length) smallest = i;
  }
  if (spares[smallest]!.length < b.length) spares[smallest] = b;
}
const CLOSE_TIMEOUT_MS = 30_000;
/** Rounds of the microtask queue with nothing sent before a turn's frames leave (#settle). */
const QUIET_CHECKS = 3;

export function makeConnection(
  opts: ConnectionOptions,
  events: WsEvents,
): Opening {
  const c = new Connection(opts, events);
  return {
    connection: c,
    open: (t, leftover, preface) => c.start(t, leftover, preface),
    abort: (reason, t) => c.abort(reason, t),
  };
}

/**
 * A class, not a closure per function: an idle worker's connection is one
 * object with its fields, its methods shared (closures cost ~2.5 KiB of heap
 * per connection, measured; issue 31's "memory per idle worker").
 */
class Connection implements WsConnection {
  readonly #masked: boolean;
  readonly #parser: FrameParser;
  readonly #events: WsEvents;
  readonly #closeTimeoutMs: number;
  #state: WsState = "connecting";
  #transport: Transport | null = null;
  /**
   * Frames of this turn; `#spare` is the other buffer, back from its write
   * while frames were queued for the next one. Both start empty and grow as
   * frames come: an idle connection holds one (issue 31: memory per idle
   * worker).
   */
  #fill: Uint8Array<ArrayBuffer> = EMPTY;
  #fillLen = 0;
  #spare: Uint8Array<ArrayBuffer> | null = null;
  /** Bytes of the write in flight (0: none). */
  #writing = 0;
  #flushScheduled = false;
  /** Flush checks come round with no frame sent since (see #settle). */
  #quietChecks = 0;
  #closeSent = false;
  #closeReceived = false;
  /** Our FIN goes once our close frame is written (see #finishWrites). */
  #finAfterWrite = false;
  #closeCode = CLOSE_ABNORMAL;
  #closeReason = "";
  #closeTimer: ReturnType<typeof setTimeout> | undefined;
  #closeListeners: (() => void)[] | null = null;

  constructor(opts: ConnectionOptions, events: WsEvents) {
    this.#masked = opts.role === "client";
    this.#parser = makeFrameParser({
      masked: !this.#masked,
      maxPayload: opts.maxPayload,
    });
    this.#events = events;
    this.#closeTimeoutMs = opts.closeTimeoutMs ?? CLOSE_TIMEOUT_MS;
  }

  get state(): WsState {
    return this.#state;
  }

  get bufferedAmount(): number {
    return this.#fillLen + this.#writing;
  }

  get maxPayload(): number {
    return this.#parser.maxPayload;
  }

  set maxPayload(n: number) {
    this.#parser.maxPayload = n;
  }

  sendText(text: string): void {
    if (this.#closeSent || this.#state === "closed") return;
    // Encoded straight into the buffer, after room for the largest header
    // its byte length could need; moved back when the header is shorter.
    const most = text.length * 3;
    const guess = headerLength(most, this.#masked);
    const at = this.#reserve(guess + most);
    const fill = this.#fill;
    const { written } = encoder.encodeInto(
      text,
      fill.subarray(at + guess, at + guess + most),
    );
    const head = headerLength(written, this.#masked);
    if (head !== guess) {
      fill.copyWithin(at + head, at + guess, at + guess + written);
    }
    this.#seal(at, OP_TEXT, written);
  }

  sendBinary(bytes: Uint8Array): void {
    if (this.#closeSent || this.#state === "closed") return;
    this.#queueFrame(OP_BINARY, bytes);
  }

  sendBinaryWith(length: number, write: (into: Uint8Array) => void): void {
    if (this.#closeSent || this.#state === "closed") return;
    const head = headerLength(length, this.#masked);
    const at = this.#reserve(head + length);
    write(this.#fill.subarray(at + head, at + head + length));
    this.#seal(at, OP_BINARY, length);
  }

  close(code: number, reason: string): void {
    if (this.#state === "connecting") return this.terminate();
    if (this.#closeSent || this.#state === "closed") return;
    this.#sendClose(code, reason);
  }

  terminate(): void {
    if (this.#state === "closed") return;
    this.#transport?.close();
    // Reported on a later turn, as a socket's close is: the caller may be in
    // the middle of sending.
    queueMicrotask(() => this.#finish());
    this.#parser.stop();
    this.#state = "closing";
    this.#closeSent = true; // nothing more is queued
  }

  once(_event: "close", listener: () => void): void {
    if (this.#state === "closed") queueMicrotask(listener);
    else (this.#closeListeners ??= []).push(listener);
  }

  /** Opening.open. */
  start(t: Transport, leftover: Uint8Array, preface?: Uint8Array): void {
    if (this.#state !== "connecting") return t.close();
    this.#transport = t;
    this.#state = "open";
    if (preface !== undefined) this.#prepend(preface);
    this.#schedule();
    this.#events.onOpen?.();
    // Reading starts once the caller holds the connection (accept.ts
    // returns it): no message comes before its owner knows it.
    queueMicrotask(() => {
      if (this.#state === "closed") return;
      if (leftover.length > 0) this.#onData(leftover);
      t.read((bytes) => this.#onData(bytes), () => this.#finish());
    });
  }

  /** Opening.abort. */
  abort(reason: string, t?: Transport): void {
    t?.close();
    if (this.#state !== "connecting") return;
    this.#closeReason = reason;
    this.#state = "closing";
    queueMicrotask(() => this.#finish());
  }

  /** This turn's frames, in one write. */
  flush(): void {
    this.#flushScheduled = false;
    const t = this.#transport;
    if (t === null || this.#writing > 0) return;
    if (this.#fillLen === 0) return this.#finishWrites();
    const out = this.#fill.subarray(0, this.#fillLen);
    this.#writing = this.#fillLen;
    this.#fill = this.#spare ?? EMPTY;
    this.#spare = null;
    this.#fillLen = 0;
    t.write(out).then(() => {
      this.#writing = 0;
      if (out.buffer.byteLength <= KEEP_BYTES_MAX) {
        // Nothing queued meanwhile: the written buffer is the next turn's
        // and `#fill` (empty) goes, so an idle connection keeps one buffer.
        if (this.#fillLen === 0) this.#fill = new Uint8Array(out.buffer);
        else this.#spare = new Uint8Array(out.buffer);
      } else giveSpare(new Uint8Array(out.buffer));
      // What was queued meanwhile already waited a turn: it goes now.
      this.flush();
    }, () => {
      this.#writing = 0;
      this.#fillLen = 0;
      // The socket broke: its read side ends the connection.
      if (this.#state !== "closed") t.close();
    });
  }

  #reserve(n: number): number {
    const fill = this.#fill;
    const len = this.#fillLen;
    if (len + n > fill.length) {
      const size = Math.max(len + n, fill.length * 2, START_BYTES);
      const bigger = (size > KEEP_BYTES_MAX ? takeSpare(size) : null) ??
        new Uint8Array(size);
      bigger.set(fill.subarray(0, len));
      this.#fill = bigger;
      // Outgrown, and never the buffer in flight (flush took that one away).
      if (fill.length > KEEP_BYTES_MAX) giveSpare(fill);
    }
    return len;
  }

  /** Writes a frame's header at `at` (masking what follows it), ends the frame. */
  #seal(at: number, op: number, length: number): void {
    const key = this.#masked ? nextMaskKey() : null;
    const fill = this.#fill;
    const head = writeHeader(fill, at, op, length, key);
    if (key !== null) {
      applyMask(fill.subarray(at + head, at + head + length), key, 0);
    }
    this.#fillLen = at + head + length;
    this.#schedule();
  }

  #queueFrame(op: number, payload: Uint8Array): void {
    const head = headerLength(payload.length, this.#masked);
    const at = this.#reserve(head + payload.length);
    this.#fill.set(payload, at + head);
    this.#seal(at, op, payload.length);
  }

  #schedule(): void {
    if (this.#transport === null || this.#writing > 0) return;
    this.#quietChecks = 0;
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    queueMicrotask(() => this.#settle());
  }

  /**
   * The end of the turn's sending, as near as microtasks can tell: the check
   * goes to the back of the microtask queue again until it has come round
   * QUIET_CHECKS times with no frame sent in between, then the frames leave
   * in one write. So frames sent synchronously, by other connections' reads
   * resolved in the same tick, or by a promise chain stepping through a few
   * awaits, share it. Issue 31: a setImmediate waited for the event loop's
   * immediates phase, 7–17 µs on each link hop at concurrency 1 (C281).
   */
  #settle(): void {
    if (++this.#quietChecks < QUIET_CHECKS && this.#state !== "closed") {
      queueMicrotask(() => this.#settle());
      return;
    }
    this.flush();
  }

  /** Everything is written: our FIN when the close says so. */
  #finishWrites(): void {
    if (!this.#finAfterWrite || this.#transport === null) return;
    this.#finAfterWrite = false;
    this.#transport.closeWrite();
  }

  #sendClose(code: number, reason: string): void {
    this.#closeSent = true;
    this.#state = "closing";
    this.#queueFrame(
      OP_CLOSE,
      code === CLOSE_NO_CODE ? new Uint8Array(0) : closePayload(code, reason),
    );
    // A server ends the TCP connection first (RFC 6455 section 7.1.1), and
    // need not wait for the reply to do so; a client does once both close
    // frames were exchanged.
    if (!this.#masked || this.#closeReceived) this.#finAfterWrite = true;
    // Nothing of theirs is kept now but their close: a data frame larger
    // than a control frame stops the parser (see "fail").
    this.#parser.maxPayload = CONTROL_PAYLOAD_MAX;
    this.#closeTimer = setTimeout(terminateLater, this.#closeTimeoutMs, this);
    this.#schedule();
  }

  #onReceived(m: Received): void {
    switch (m.kind) {
      case "text":
        if (this.#state === "open") this.#events.onText(m.text);
        return;
      case "binary":
        if (this.#state === "open") this.#events.onBinary(m.bytes);
        return;
      case "ping":
        if (this.#state === "open") this.#queueFrame(OP_PONG, m.payload);
        return;
      case "pong":
        return;
      case "close":
        if (this.#closeReceived) return;
        this.#closeReceived = true;
        this.#closeCode = m.code;
        this.#closeReason = m.reason;
        if (!this.#closeSent) this.#sendClose(m.code, m.reason);
        else if (this.#masked) {
          this.#finAfterWrite = true;
          this.#schedule();
        }
        return;
      case "fail":
        // After our close nothing of theirs matters: the parser has stopped,
        // their bytes are dropped until they end or the linger cuts them.
        if (this.#closeSent) return;
        this.#closeCode = m.code;
        this.#closeReason = m.reason;
        this.#sendClose(m.code, m.reason);
        // Nothing more of theirs is parsed: our FIN goes with our close.
        this.#finAfterWrite = true;
        return;
      default:
        return m satisfies never;
    }
  }

  #onData(bytes: Uint8Array): void {
    this.#events.onRead?.(bytes.length);
    if (this.#state === "closed") return;
    this.#parser.parse(bytes, (m) => this.#onReceived(m));
  }

  /** The socket is gone: onClose once, then the close listeners. */
  #finish(): void {
    if (this.#state === "closed") return;
    this.#state = "closed";
    clearTimeout(this.#closeTimer);
    this.#parser.stop();
    this.#transport?.close();
    this.#fill = EMPTY;
    this.#spare = null;
    this.#fillLen = 0;
    this.#events.onClose(
      this.#closeCode,
      this.#closeReason,
      this.#closeSent && this.#closeReceived,
    );
    for (const l of this.#closeListeners?.splice(0) ?? []) l();
  }

  #prepend(head: Uint8Array): void {
    const at = this.#reserve(head.length);
    this.#fill.copyWithin(head.length, 0, at);
    this.#fill.set(head);
    this.#fillLen = at + head.length;
  }
}

function terminateLater(c: Connection): void {
  c.terminate();
}

const EMPTY: Uint8Array<ArrayBuffer> = new Uint8Array(0);

/** Mask keys come from a pool of random bytes, refilled when used up (as `ws` does). */
const maskPool = new Uint8Array(8192);
let maskAt = maskPool.length;

function nextMaskKey(): number {
  if (maskAt === maskPool.length) {
    randomFillSync(maskPool);
    maskAt = 0;
  }
  const key = readMaskKey(maskPool, maskAt);
  maskAt += 4;
  return key;
}
