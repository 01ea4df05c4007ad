// The net.Socket that node:http's `upgrade` event hands over, as a transport
// (transport.ts): the server's worker door and peer links use it while the
// client door is node:http. Once the door is Deno.listen, upgrades come as a
// Deno.Conn and this adapter goes.
import type { Duplex } from "node:stream";

import type { Transport } from "./transport.ts";

export function nodeSocketTransport(socket: Duplex): Transport {
  return {
    read(onData, onEnd) {
      let ended = false;
      const end = () => {
        if (ended) return;
        ended = true;
        socket.off("data", onData);
        onEnd();
      };
      socket.on("data", onData);
      socket.once("end", end);
      socket.once("close", end);
      // Followed by "close".
      socket.on("error", ignore);
      if (socket.destroyed) end();
    },
    write(bytes) {
      if (socket.destroyed || !socket.writable) {
        return Promise.reject(new Error("socket closed"));
      }
      // Node queues what it cannot write yet (socket.writableLength), keeping
      // the array itself: it gets a copy, so the connection may reuse its
      // buffer at once. Not waiting for the write's callback lets the next
      // turn's frames go without waiting for it (as `ws` did).
      socket.write(bytes.slice());
      return RESOLVED;
    },
    queued: () => socket.writableLength,
    closeWrite() {
      socket.end();
    },
    close() {
      socket.destroy();
    },
  };
}

function ignore(): void {}

const RESOLVED = Promise.resolve();
