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
      return new Promise((resolve, reject) => {
        socket.write(bytes, (e) => e == null ? resolve() : reject(e));
      });
    },
    closeWrite() {
      socket.end();
    },
    close() {
      socket.destroy();
    },
  };
}

function ignore(): void {}
