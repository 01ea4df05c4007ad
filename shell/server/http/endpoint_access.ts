// Who may read the endpoints that describe the fleet (issue 15): /metrics names
// tenants and models, /v1/capabilities can name every worker with its load. Once
// API keys are required, neither is public: /metrics wants the admin token or
// METRICS_TOKEN, /v1/capabilities a client key, and only the admin token sees
// per-worker detail. Without required keys (a trusted network) /metrics stays
// open as before and /v1/capabilities shows the fleet without worker names.
import type { HttpRequest } from "../door/exchange.ts";
import {
  apiError,
  type ClientApi,
  type ClientError,
} from "../../../core/mod.ts";
import type { Access } from "./client_http.ts";
import { bearerCheck } from "../secret.ts";

export type AccessPolicy = {
  adminToken: string;
  metricsToken: string;
  requireApiKeys: boolean;
};

/** An answer that refuses the caller, in the operator routes' error shape. */
export type Refusal = {
  kind: "denied";
  error: ClientError;
  headers: Record<string, string>;
};

export type CapabilitiesAccess =
  | { kind: "detail" }
  | { kind: "fleet" }
  | Refusal;

export type MetricsAccess = { kind: "allowed" } | Refusal;

function isAdmin(req: HttpRequest, p: AccessPolicy): boolean {
  return bearerCheck(req, p.adminToken) === "ok";
}

/** /v1/capabilities: admin sees workers; a client (or anyone, keys not required) sees the fleet. */
export function capabilitiesAccess(
  req: HttpRequest,
  p: AccessPolicy,
  authorize: (req: HttpRequest, api: ClientApi) => Access,
): CapabilitiesAccess {
  if (isAdmin(req, p)) return { kind: "detail" };
  if (!p.requireApiKeys) return { kind: "fleet" };
  // Either header a client sends on its own routes is accepted here.
  const access = authorize(req, "anthropic");
  if (access.kind === "granted") return { kind: "fleet" };
  return { kind: "denied", error: access.error, headers: {} };
}

/** /metrics: open unless keys are required or METRICS_TOKEN is set; then that token or the admin token. */
export function metricsAccess(
  req: HttpRequest,
  p: AccessPolicy,
): MetricsAccess {
  if (!p.requireApiKeys && p.metricsToken === "") return { kind: "allowed" };
  const check = bearerCheck(req, p.metricsToken);
  if (check === "ok" || isAdmin(req, p)) return { kind: "allowed" };
  const how = p.metricsToken === ""
    ? "send Authorization: Bearer <MODELRELAY_ADMIN_TOKEN>, or set METRICS_TOKEN for Prometheus (authorization.credentials in the scrape config)"
    : "send Authorization: Bearer <METRICS_TOKEN> (authorization.credentials in the Prometheus scrape config)";
  return {
    kind: "denied",
    error: apiError(
      check === "missing" ? "missing_metrics_token" : "invalid_metrics_token",
      { how },
    ),
    headers: { "www-authenticate": 'Bearer realm="metrics"' },
  };
}
