// METRICS_PORT (spec 004, issue 32): a second listener that serves /metrics
// and nothing else, so Prometheus can scrape a port the clients never see.
// The same door as the main port (door/door.ts), without upgrades.
import type { HttpRequest, HttpResponse } from "../door/exchange.ts";
import { openDoor } from "../door/door.ts";
import { answerUnparsable, replyError } from "../http/http_reply.ts";
import { apiError } from "../../../core/mod.ts";

export type MetricsListener = { port: number; close: () => Promise<void> };

/** Listens on hostname:port; `serve` answers /metrics (the same handler as the main port). */
export function startMetricsListener(
  hostname: string,
  port: number,
  serve: (req: HttpRequest, res: HttpResponse) => void,
): Promise<MetricsListener> {
  try {
    const door = openDoor(hostname, port, {
      request(req, res) {
        const path = req.url.split("?")[0] ?? "/";
        if (path === "/metrics") return serve(req, res);
        req.resume();
        // This port (METRICS_PORT) serves only /metrics.
        replyError(
          res,
          apiError("not_found", {
            method: req.method,
            path,
            only: "/metrics (METRICS_PORT)",
          }),
        );
      },
      upgrade(_req, conn, _head, closed) {
        conn.close();
        closed();
      },
      unparsable: answerUnparsable,
    });
    return Promise.resolve({
      port: door.port,
      close: () => door.close(),
    });
  } catch (e) {
    return Promise.reject(e);
  }
}
