// A fleet of idle workers for scenario (e), all in the harness process: each
// opens the worker WebSocket, registers a model no request asks for, and answers
// pings. It is the server's memory per connected worker that is measured, so the
// fleet only has to speak the protocol, not forward anything.
import { SECRET } from "./procs.ts";

export type Fleet = { size: number; close(): Promise<void> };

function connectOne(
  url: string,
  i: number,
  timeoutMs: number,
): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { "X-Worker-Secret": SECRET } });
    const timer = setTimeout(() => {
      ws.close();
      reject(
        new Error(`fleet worker ${i} did not register in ${timeoutMs} ms`),
      );
    }, timeoutMs);
    ws.onopen = () => {
      ws.send(JSON.stringify({
        type: "register",
        worker_name: `fleet-${i}`,
        models: ["fleet-idle-model"],
        max_concurrent: 1,
        protocol_version: "1",
        current_load: 0,
      }));
    };
    ws.onmessage = (m) => {
      const msg = JSON.parse(String(m.data)) as { type: string };
      if (msg.type === "register_ack") {
        clearTimeout(timer);
        resolve(ws);
      } else if (msg.type === "ping") {
        ws.send(JSON.stringify({ type: "pong", current_load: 0 }));
      }
    };
    ws.onerror = () => {};
    ws.onclose = (c) => {
      clearTimeout(timer);
      reject(new Error(`fleet worker ${i} closed: ${c.code} ${c.reason}`));
    };
  });
}

/** Connects `n` workers, `parallel` handshakes at a time, each bounded in time. */
export async function startFleet(
  relayUrl: string,
  n: number,
  parallel = 50,
): Promise<Fleet> {
  const url = relayUrl.replace(/^http/, "ws") +
    "/v1/worker/connect?provider=local";
  const sockets: WebSocket[] = [];
  let next = 0;
  const lane = async () => {
    while (next < n) sockets.push(await connectOne(url, next++, 15_000));
  };
  try {
    await Promise.all(Array.from({ length: parallel }, lane));
  } catch (e) {
    for (const ws of sockets) ws.close();
    throw e;
  }
  return {
    size: sockets.length,
    async close() {
      await Promise.all(sockets.map((ws) =>
        new Promise<void>((resolve) => {
          if (ws.readyState === WebSocket.CLOSED) return resolve();
          const timer = setTimeout(resolve, 5000);
          ws.onclose = () => {
            clearTimeout(timer);
            resolve();
          };
          ws.close(1000, "bench done");
        })
      ));
    },
  };
}
