// METRICS_PORT (spec 004, issue 32): a second listener that serves /metrics
// and nothing else, so Prometheus can scrape a port the clients never see.
import {
  createServer,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { replyError } from "../http/http_reply.ts";
import { apiError } from "../../../core/mod.ts";

export type MetricsListener = { port: number; close: () => Promise<void> };

/** Listens on hostname:port; `serve` answers /metrics (the same handler as the main port). */
export async function startMetricsListener(
  hostname: string,
  port: number,
  serve: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<MetricsListener> {
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    if (path === "/metrics") return serve(req, res);
    req.resume();
    // This port (METRICS_PORT) serves only /metrics.
    replyError(
      res,
      apiError("not_found", {
        method: req.method ?? "GET",
        path,
        only: "/metrics (METRICS_PORT)",
      }),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, hostname, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
