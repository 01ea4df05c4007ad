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
const CLOSE_TIMEOUT_MS = 30_000;

export function makeConnection(
  opts: ConnectionOptions,
  events: WsEvents,
): Opening {
  const masked = opts.role === "client";
  const parser: FrameParser = makeFrameParser({
    masked: !masked,
    maxPayload: opts.maxPayload,
  });
  let state: WsState = "connecting";
  let transport: Transport | null = null;
  /**
   * Frames of this turn; `spare` is the other buffer, back from its write.
   * Both start empty and grow as frames come: an idle connection holds
   * little (issue 31: memory per idle worker).
   */
  let fill: Uint8Array<ArrayBuffer> = new Uint8Array(0);
  let fillLen = 0;
  let spare: Uint8Array<ArrayBuffer> | null = null;
  /** Bytes of the write in flight (0: none). */
  let writing = 0;
  let flushScheduled = false;
  let closeSent = false;
  let closeReceived = false;
  /** Our FIN goes once our close frame is written (see finishWrites). */
  let finAfterWrite = false;
  let closeCode = CLOSE_ABNORMAL;
  let closeReason = "";
  let closeTimer: ReturnType<typeof setTimeout> | undefined;
  const closeListeners: (() => void)[] = [];

  function reserve(n: number): number {
    if (fillLen + n > fill.length) {
      const bigger = new Uint8Array(
        Math.max(fillLen + n, fill.length * 2, START_BYTES),
      );
      bigger.set(fill.subarray(0, fillLen));
      fill = bigger;
    }
    return fillLen;
  }

  /** Writes a frame's header at `at` (masking what follows it), ends the frame. */
  function seal(at: number, op: number, length: number): void {
    const key = masked ? nextMaskKey() : null;
    const head = writeHeader(fill, at, op, length, key);
    if (key !== null) {
      applyMask(fill.subarray(at + head, at + head + length), key, 0);
    }
    fillLen = at + head + length;
    schedule();
  }

  function queueFrame(op: number, payload: Uint8Array): void {
    const head = headerLength(payload.length, masked);
    const at = reserve(head + payload.length);
    fill.set(payload, at + head);
    seal(at, op, payload.length);
  }

  function schedule(): void {
    if (flushScheduled || transport === null || writing > 0) return;
    flushScheduled = true;
    setImmediate(flush);
  }

  function flush(): void {
    flushScheduled = false;
    if (transport === null || writing > 0) return;
    if (fillLen === 0) return finishWrites();
    const out = fill.subarray(0, fillLen);
    writing = fillLen;
    fill = spare ?? new Uint8Array(0);
    spare = null;
    fillLen = 0;
    transport.write(out).then(() => {
      writing = 0;
      if (out.buffer.byteLength <= KEEP_BYTES_MAX) {
        spare = new Uint8Array(out.buffer);
      }
      // What was queued meanwhile already waited a turn: it goes now.
      flush();
    }, () => {
      writing = 0;
      fillLen = 0;
      // The socket broke: its read side ends the connection.
      if (state !== "closed") transport?.close();
    });
  }

  /** Everything is written: our FIN when the close says so. */
  function finishWrites(): void {
    if (!finAfterWrite || transport === null) return;
    finAfterWrite = false;
    transport.closeWrite();
  }

  function sendClose(code: number, reason: string): void {
    closeSent = true;
    state = "closing";
    queueFrame(
      OP_CLOSE,
      code === CLOSE_NO_CODE ? new Uint8Array(0) : closePayload(code, reason),
    );
    // A server ends the TCP connection first (RFC 6455 section 7.1.1), and
    // need not wait for the reply to do so; a client does once both close
    // frames were exchanged.
    if (!masked || closeReceived) finAfterWrite = true;
    // Nothing of theirs is kept now but their close: a data frame larger
    // than a control frame stops the parser (see "fail").
    parser.maxPayload = CONTROL_PAYLOAD_MAX;
    closeTimer = setTimeout(terminate, opts.closeTimeoutMs ?? CLOSE_TIMEOUT_MS);
    schedule();
  }

  function onReceived(m: Received): void {
    switch (m.kind) {
      case "text":
        if (state === "open") events.onText(m.text);
        return;
      case "binary":
        if (state === "open") events.onBinary(m.bytes);
        return;
      case "ping":
        if (state === "open") queueFrame(OP_PONG, m.payload);
        return;
      case "pong":
        return;
      case "close":
        if (closeReceived) return;
        closeReceived = true;
        closeCode = m.code;
        closeReason = m.reason;
        if (!closeSent) sendClose(m.code, m.reason);
        else if (masked) {
          finAfterWrite = true;
          schedule();
        }
        return;
      case "fail":
        // After our close nothing of theirs matters: the parser has stopped,
        // their bytes are dropped until they end or the linger cuts them.
        if (closeSent) return;
        closeCode = m.code;
        closeReason = m.reason;
        sendClose(m.code, m.reason);
        // Nothing more of theirs is parsed: our FIN goes with our close.
        finAfterWrite = true;
        return;
      default:
        return m satisfies never;
    }
  }

  function onData(bytes: Uint8Array): void {
    events.onRead?.(bytes.length);
    if (state === "closed") return;
    parser.parse(bytes, onReceived);
  }

  /** The socket is gone: onClose once, then the close listeners. */
  function finish(): void {
    if (state === "closed") return;
    state = "closed";
    clearTimeout(closeTimer);
    parser.stop();
    transport?.close();
    fill = EMPTY;
    spare = null;
    fillLen = 0;
    events.onClose(closeCode, closeReason, closeSent && closeReceived);
    for (const l of closeListeners.splice(0)) l();
  }

  function terminate(): void {
    if (state === "closed") return;
    transport?.close();
    // Reported on a later turn, as a socket's close is: the caller may be in
    // the middle of sending.
    queueMicrotask(finish);
    parser.stop();
    state = "closing";
    closeSent = true; // nothing more is queued
  }

  const connection: WsConnection = {
    get state() {
      return state;
    },
    get bufferedAmount() {
      return fillLen + writing + (transport?.queued() ?? 0);
    },
    get maxPayload() {
      return parser.maxPayload;
    },
    set maxPayload(n: number) {
      parser.maxPayload = n;
    },
    sendText(text) {
      if (closeSent || state === "closed") return;
      // Encoded straight into the buffer, after room for the largest header
      // its byte length could need; moved back when the header is shorter.
      const most = text.length * 3;
      const guess = headerLength(most, masked);
      const at = reserve(guess + most);
      const { written } = encoder.encodeInto(
        text,
        fill.subarray(at + guess, at + guess + most),
      );
      const head = headerLength(written, masked);
      if (head !== guess) {
        fill.copyWithin(at + head, at + guess, at + guess + written);
      }
      seal(at, OP_TEXT, written);
    },
    sendBinary(bytes) {
      if (closeSent || state === "closed") return;
      queueFrame(OP_BINARY, bytes);
    },
    sendBinaryWith(length, write) {
      if (closeSent || state === "closed") return;
      const head = headerLength(length, masked);
      const at = reserve(head + length);
      write(fill.subarray(at + head, at + head + length));
      seal(at, OP_BINARY, length);
    },
    close(code, reason) {
      if (state === "connecting") return terminate();
      if (closeSent || state === "closed") return;
      sendClose(code, reason);
    },
    terminate,
    once(_event, listener) {
      if (state === "closed") queueMicrotask(listener);
      else closeListeners.push(listener);
    },
  };

  return {
    connection,
    open(t, leftover, preface) {
      if (state !== "connecting") return t.close();
      transport = t;
      state = "open";
      if (preface !== undefined) prepend(preface);
      schedule();
      events.onOpen?.();
      // Reading starts once the caller holds the connection (accept.ts
      // returns it): no message comes before its owner knows it.
      queueMicrotask(() => {
        if (state === "closed") return;
        if (leftover.length > 0) onData(leftover);
        t.read(onData, finish);
      });
    },
    abort(reason, t) {
      t?.close();
      if (state !== "connecting") return;
      closeReason = reason;
      state = "closing";
      queueMicrotask(finish);
    },
  };

  function prepend(head: Uint8Array): void {
    reserve(head.length);
    fill.copyWithin(head.length, 0, fillLen);
    fill.set(head);
    fillLen += head.length;
  }
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
