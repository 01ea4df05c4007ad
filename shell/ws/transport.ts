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
  /** Writes all of `bytes`; resolves once written, rejects when the socket broke. */
  write(bytes: Uint8Array): Promise<void>;
  /** Ends our side (FIN); reading goes on. */
  closeWrite(): void;
  /** Cuts the socket now. */
  close(): void;
};

/** One read buffer per connection, reused for every read. */
const READ_BYTES = 64 * 1024;

/** A Deno.Conn (TCP or TLS) as a transport. */
export function connTransport(conn: Deno.Conn): Transport {
  let closed = false;
  return {
    read(onData, onEnd) {
      const buf = new Uint8Array(READ_BYTES);
      (async () => {
        try {
          for (;;) {
            const n = await conn.read(buf);
            if (n === null) break;
            onData(buf.subarray(0, n));
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
