// CORS for /v1/* (issue 15), so browser clients can call the relay as they
// could the original (which allows any origin, method and header). Preflights
// are answered here, before auth: a browser sends them without credentials.
// Never Access-Control-Allow-Credentials: keys travel in Authorization or
// x-api-key, set by the page's own script, never as cookies.
import type { HttpRequest, HttpResponse } from "../door/exchange.ts";
import { apiError } from "../../../core/mod.ts";
import { errorBody } from "./errors.ts";

/** Always allowed request headers; others a preflight asks for are echoed too (SDKs add x-stainless-*). */
export const CORS_ALLOW_HEADERS = [
  "authorization",
  "content-type",
  "x-api-key",
  "anthropic-version",
  "anthropic-beta",
  "anthropic-dangerous-direct-browser-access",
  "x-tenant-id",
  "x-priority",
  "x-cache-mode",
  "x-cache-tag",
];

/** Response headers a page's script may read (the rest are hidden by the browser). */
export const CORS_EXPOSE_HEADERS = [
  "retry-after",
  "x-queue-wait-ms",
  "x-cache-hit",
  "x-cache-tokens-reused",
  "x-gpu-time-ms",
];

export const CORS_MAX_AGE_SECS = 86_400;

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** The Access-Control-Allow-Origin value for `origin`, or null when it is not allowed. */
function allowedOrigin(
  origin: string,
  allowed: readonly string[],
): string | null {
  if (allowed.includes("*")) return "*";
  return allowed.includes(origin) ? origin : null;
}

/**
 * Applies CORS to a /v1/* request. Sets the headers the answer needs (they
 * merge into whatever writeHead the route calls, streams and errors included)
 * and answers a preflight itself; returns true when it answered.
 */
export function applyCors(
  req: HttpRequest,
  res: HttpResponse,
  allowed: readonly string[],
): boolean {
  const list = !allowed.includes("*");
  // The answer depends on Origin: caches must not reuse it for another origin.
  if (list) res.setHeader("vary", "Origin");
  const origin = req.headers.origin;
  const preflight = req.method === "OPTIONS";
  if (origin === undefined) {
    if (!preflight) return false;
    req.resume();
    res.writeHead(204, { allow: "GET, POST, OPTIONS" });
    res.end();
    return true;
  }
  const allow = allowedOrigin(origin, allowed);
  if (allow === null) {
    if (!preflight) return false;
    req.resume();
    res.writeHead(403, { "content-type": "application/json" });
    res.end(
      errorBody("openai", apiError("cors_origin_not_allowed", { origin })),
    );
    return true;
  }
  res.setHeader("access-control-allow-origin", allow);
  if (!preflight) {
    res.setHeader(
      "access-control-expose-headers",
      CORS_EXPOSE_HEADERS.join(", "),
    );
    return false;
  }
  req.resume();
  const asked = String(req.headers["access-control-request-headers"] ?? "")
    .split(",").map((h) => h.trim().toLowerCase())
    .filter((h) => h !== "" && HEADER_NAME.test(h));
  const headers = [...new Set([...CORS_ALLOW_HEADERS, ...asked])];
  res.writeHead(204, {
    "access-control-allow-methods": "GET, POST, OPTIONS",
    "access-control-allow-headers": headers.join(", "),
    "access-control-max-age": String(CORS_MAX_AGE_SECS),
  });
  res.end();
  return true;
}
