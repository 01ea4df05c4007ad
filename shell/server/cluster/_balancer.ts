// Test-only: the load balancer in front of a cluster, a round-robin TCP relay on
// loopback (node:net), as an L4 balancer would be. Each new connection goes to
// the next backend that accepts it; a dead backend is skipped, so workers and
// clients reconnecting after an instance dies land on a survivor.
import { createConnection, createServer, type Socket } from "node:net";
import type { AddressInfo } from "node:net";

export type Balancer = {
  url: string;
  /** Backend ports, in rotation order; tests may replace entries. */
  backends: number[];
  /** The backend port of every connection made, in order (which instance a worker is on). */
  routed: number[];
  close(): Promise<void>;
};

export async function startBalancer(backends: number[]): Promise<Balancer> {
  let next = 0;
  const open = new Set<Socket>();
  const connectAny = (
    client: Socket,
    tries: number,
  ): void => {
    if (tries >= b.backends.length) {
      client.destroy();
      return;
    }
    const port = b.backends[next++ % b.backends.length]!;
    const upstream = createConnection({ host: "127.0.0.1", port });
    let connected = false;
    upstream.once("error", () => {
      if (!connected) connectAny(client, tries + 1);
    });
    upstream.once("connect", () => {
      connected = true;
      b.routed.push(port);
      open.add(upstream);
      upstream.setNoDelay(true);
      client.pipe(upstream).pipe(client);
      client.resume();
      const end = () => {
        client.destroy();
        upstream.destroy();
        open.delete(upstream);
      };
      upstream.on("close", end);
      client.on("close", end);
      upstream.on("error", end);
      client.on("error", end);
    });
  };
  const server = createServer((client) => {
    open.add(client);
    client.pause();
    client.setNoDelay(true);
    client.on("close", () => open.delete(client));
    client.on("error", () => client.destroy());
    connectAny(client, 0);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const b: Balancer = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    backends,
    routed: [],
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
  return b;
}
