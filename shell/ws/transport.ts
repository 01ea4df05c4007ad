// The byte stream under a WebSocket connection (connection.ts): a Deno.Conn.

import { spareBuffers } from "../spare_buffers.ts";

export type Transport = {
  /**
   * Starts reading: `onData` for each chunk (its bytes are valid only during
   * the call and may be changed by it), then `onEnd` once, at the peer's end,
   * an error, or after `close`. A later call hands the reads to new callbacks
   * (an upgrade's socket, read while the request waited, handed to its
   * connection): the old ones are dropped, not kept for the socket's life.
   */
  read(onData: (bytes: Uint8Array) => void, onEnd: () => void): void;
  /** Writes all of `bytes`; resolves once written, rejects when the socket broke. */
  write(bytes: Uint8Array): Promise<void>;
  /** Ends our side (FIN); reading goes on. */
  closeWrite(): void;
  /** Cuts the socket now. */
  close(): void;
};

/**
 * Read buffers: a small one while the peer sends little (an idle worker's
 * pings), a large one from a read that filled the small one until a read
 * fits the small one again. Each is reused for every read while in use.
 * Issue 31: 64 KiB per connection for its whole life was most of an idle
 * worker's memory.
 */
const READ_SMALL_BYTES = 1024;
const READ_LARGE_BYTES = 64 * 1024;

/**
 * Large read buffers let go (a read fitting the small one again) are kept,
 * at most 4, for the next connection or turn that needs one
 * (shell/spare_buffers.ts): a message over 1 KiB (a request frame with a real
 * prompt, an answer of a few hundred tokens) took a new 64 KiB buffer each
 * time. A buffer given back is free: a chunk's bytes are valid only during
 * `onData`, whose parser copies what it keeps.
 */
const largeReads = spareBuffers(READ_LARGE_BYTES, 4);

/** A Deno.Conn (TCP or TLS) as a transport. */
export function connTransport(conn: Deno.Conn): Transport {
  return new ConnTransport(conn);
}

/**
 * One object a connection, its methods shared (issue 31: an idle worker's
 * socket lives for days; closures per socket were a third of its heap).
 */
class ConnTransport implements Transport {
  #conn: Deno.Conn;
  #closed = false;
  #reading = false;
  #ended = false;
  #onData: (bytes: Uint8Array) => void = ignore;
  #onEnd: () => void = ignore;

  constructor(conn: Deno.Conn) {
    this.#conn = conn;
  }

  read(onData: (bytes: Uint8Array) => void, onEnd: () => void): void {
    this.#onData = onData;
    this.#onEnd = onEnd;
    if (this.#ended) return this.#end();
    if (!this.#reading) {
      this.#reading = true;
      void this.#readLoop();
    }
  }

  async #readLoop(): Promise<void> {
    const small = new Uint8Array(READ_SMALL_BYTES);
    let large: Uint8Array | null = null;
    try {
      for (;;) {
        const buf = large ?? small;
        const n = await this.#conn.read(buf);
        if (n === null) break;
        this.#onData(buf.subarray(0, n));
        if (n === buf.length) {
          large ??= largeReads.take();
        } else if (n <= READ_SMALL_BYTES && large !== null) {
          largeReads.give(large);
          large = null;
        }
      }
    } catch {
      // A reset, or our own close: the end either way.
    }
    // No read is pending: the loop only ends after one returned.
    if (large !== null) largeReads.give(large);
    this.#ended = true;
    this.#end();
  }

  /** `onEnd` once, then no callback is kept. */
  #end(): void {
    const onEnd = this.#onEnd;
    this.#onData = ignore;
    this.#onEnd = ignore;
    onEnd();
  }

  async write(bytes: Uint8Array): Promise<void> {
    let at = 0;
    while (at < bytes.length) at += await this.#conn.write(bytes.subarray(at));
  }

  closeWrite(): void {
    this.#conn.closeWrite().catch(() => {
      // Already closed, or reset: the read side reports the end.
    });
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#conn.close();
    } catch {
      // Already closed.
    }
  }
}

function ignore(): void {}
