// An upgraded connection as the `ws` package takes it (issue 31): a node
// Duplex over the door's Deno.TcpConn, so the worker door and the cluster's
// peer link keep their WebSocket servers while the client door runs on
// `Deno.listen`. Reads are pushed as they come (paused when `ws` stops
// reading); writes go out in order, corked writes (frame_batch.ts) as one.
import { Buffer } from "node:buffer";
import { Duplex } from "node:stream";

export type UpgradeSocket = Duplex & {
  /** The bytes read after the upgrade's head (the handshake's `head`). */
  head: Buffer;
  remoteAddress: string;
  setNoDelay(on?: boolean): UpgradeSocket;
  setTimeout(ms: number): UpgradeSocket;
  setKeepAlive(): UpgradeSocket;
};

const READ_BYTES = 64 * 1024;

/** `closed` is called once, when the socket has closed. */
export function upgradeSocket(
  conn: Deno.TcpConn,
  head: Uint8Array,
  closed: () => void,
): UpgradeSocket {
  let reading = false;
  let done = false;
  const writeAll = async (bytes: Uint8Array): Promise<void> => {
    for (let at = 0; at < bytes.length;) {
      at += await conn.write(at === 0 ? bytes : bytes.subarray(at));
    }
  };
  const socket = new Duplex({
    read() {
      if (reading) return;
      reading = true;
      void pump();
    },
    write(chunk: Buffer, _encoding, callback) {
      writeAll(chunk).then(() => callback(), (e) => callback(e));
    },
    writev(chunks, callback) {
      writeAll(Buffer.concat(chunks.map((c) => c.chunk as Buffer))).then(
        () => callback(),
        (e) => callback(e),
      );
    },
    final(callback) {
      conn.closeWrite().then(() => callback(), () => callback());
    },
    destroy(error, callback) {
      try {
        conn.close();
      } catch {
        // already closed
      }
      callback(error);
    },
  }) as UpgradeSocket;
  async function pump(): Promise<void> {
    const buf = new Uint8Array(READ_BYTES);
    while (reading) {
      let n: number | null;
      try {
        n = await conn.read(buf);
      } catch {
        if (!socket.destroyed) socket.destroy();
        return;
      }
      if (n === null) {
        reading = false;
        socket.push(null);
        return;
      }
      if (!socket.push(Buffer.from(buf.subarray(0, n)))) reading = false;
    }
  }
  socket.once("close", () => {
    if (done) return;
    done = true;
    closed();
  });
  socket.head = Buffer.from(head);
  socket.remoteAddress = (conn.remoteAddr as Deno.NetAddr).hostname;
  socket.setNoDelay = (on = true) => {
    try {
      conn.setNoDelay(on);
    } catch {
      // closed
    }
    return socket;
  };
  socket.setTimeout = () => socket;
  socket.setKeepAlive = () => socket;
  return socket;
}
