// The byte stream under a WebSocket connection (connection.ts): a Deno.Conn
// here; node_socket.ts adapts the net.Socket that node:http hands over for an
// upgrade, while the server's door is still node:http.

export type Transport = {
  /**
   * Starts reading: `onData` for each chunk (its bytes are valid only during
   * the call and may be changed by it), then `onEnd` once, at the peer's end,
   * an error, or after `close`.
   */
  read(onData: (bytes: Uint8Array) => void, onEnd: () => void): void;
  /**
   * Writes all of `bytes`; resolves once written (or, for a transport that
   * queues, once queued: it keeps no reference to `bytes`), rejects when the
   * socket broke.
   */
  write(bytes: Uint8Array): Promise<void>;
  /** Bytes written and queued by the transport, not yet on the wire. */
  queued(): number;
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

/** A Deno.Conn (TCP or TLS) as a transport. */
export function connTransport(conn: Deno.Conn): Transport {
  let closed = false;
  return {
    read(onData, onEnd) {
      const small = new Uint8Array(READ_SMALL_BYTES);
      let large: Uint8Array | null = null;
      (async () => {
        try {
          for (;;) {
            const buf = large ?? small;
            const n = await conn.read(buf);
            if (n === null) break;
            onData(buf.subarray(0, n));
            if (n === buf.length) large ??= new Uint8Array(READ_LARGE_BYTES);
            else if (n <= READ_SMALL_BYTES) large = null;
          }
        } catch {
          // A reset, or our own close: the end either way.
        }
        onEnd();
      })();
    },
    async write(bytes) {
      let at = 0;
      while (at < bytes.length) at += await conn.write(bytes.subarray(at));
    },
    queued: () => 0,
    closeWrite() {
      conn.closeWrite().catch(() => {
        // Already closed, or reset: the read side reports the end.
      });
    },
    close() {
      if (closed) return;
      closed = true;
      try {
        conn.close();
      } catch {
        // Already closed.
      }
    },
  };
}
