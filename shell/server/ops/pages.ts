// Built-in web pages (C37): /dashboard (admin token required for its data) and
// /setup (connect-a-worker wizard). Static text compiled into the server, no
// build step; scripts are separate files so the CSP can forbid inline script.
//
// GET /setup/status is public, so it reveals nothing /health and /v1/models don't
// already: the number of connected workers, how many registrations happened since
// start, and the union of served models, only while /v1/models itself is public
// (issue 33.11: not once API keys are required). No worker names, ids,
// addresses or loads.
import type { HttpRequest, HttpResponse } from "../door/exchange.ts";
import { apiError, listModels, type State } from "../../../core/mod.ts";
import { replyError, sendJson } from "../http/http_reply.ts";
import { DASHBOARD_HTML, DASHBOARD_JS } from "./page_dashboard.ts";
import { SETUP_HTML, SETUP_JS } from "./page_setup.ts";
import { PAGE_CSS } from "./page_style.ts";
import type { Metrics } from "./metrics.ts";

export type PagesDeps = {
  metrics: Metrics;
  state: () => State | null;
  /** Whether GET /v1/models answers without a key (MODELRELAY_REQUIRE_API_KEYS off). */
  modelsPublic: boolean;
};

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const ASSETS: Record<string, { type: string; body: string }> = {
  "/dashboard": { type: "text/html; charset=utf-8", body: DASHBOARD_HTML },
  "/dashboard.js": {
    type: "text/javascript; charset=utf-8",
    body: DASHBOARD_JS,
  },
  "/setup": { type: "text/html; charset=utf-8", body: SETUP_HTML },
  "/setup.js": { type: "text/javascript; charset=utf-8", body: SETUP_JS },
  "/ui.css": { type: "text/css; charset=utf-8", body: PAGE_CSS },
};

export function handlePages(
  req: HttpRequest,
  res: HttpResponse,
  url: URL,
  deps: PagesDeps,
): boolean {
  const path = url.pathname.length > 1 && url.pathname.endsWith("/")
    ? url.pathname.slice(0, -1)
    : url.pathname;
  if (path === "/setup/status") {
    req.resume();
    const state = deps.state();
    if (state === null) return false;
    sendJson(res, 200, {
      workers_connected: state.workers.size,
      worker_registrations_total: deps.metrics.workerRegistrations,
      ...(deps.modelsPublic ? { models: listModels(state) } : {}),
    });
    return true;
  }
  const asset = ASSETS[path];
  if (asset === undefined) return false;
  req.resume();
  if (req.method !== "GET" && req.method !== "HEAD") {
    // Found by the HTTP fuzz (issue 15): every error is JSON in one shape.
    replyError(res, apiError("method_not_allowed", { use: "GET", path }), {
      allow: "GET",
    });
    return true;
  }
  res.writeHead(200, {
    "content-type": asset.type,
    "cache-control": "no-cache",
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
  });
  res.end(req.method === "HEAD" ? "" : asset.body);
  return true;
}
