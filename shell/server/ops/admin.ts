// Admin API (C35, C36): /admin/workers, /admin/workers/{id}/drain, /admin/stats,
// /admin/keys. Bearer MODELRELAY_ADMIN_TOKEN, compared in constant time; with no
// token configured every /admin route answers 403 saying how to enable it.
import type { HttpRequest, HttpResponse } from "../door/exchange.ts";
import {
  apiError,
  type Event,
  type State,
  workerViews,
} from "../../../core/mod.ts";
import type { ApiKeyInfo, KeyScope, KeyStore } from "./api_keys.ts";
import { KEY_NAME_MAX } from "./api_keys.ts";
import type { Metrics } from "./metrics.ts";
import { type AuthThrottle, sendThrottled } from "./auth_throttle.ts";
import { readJsonBody } from "../http/body.ts";
import { replyError, sendJson } from "../http/http_reply.ts";
import { bearerCheck } from "../secret.ts";
import { isPriority, isTenantId, TENANT_RULE } from "../http/tenancy.ts";
import { parseKeyLimits } from "./api_keys.ts";
import type { KeyLimitsText } from "./api_keys.ts";
import type { UsageLedger } from "./usage_ledger.ts";
import { sendRequests, sendUsage } from "./usage_http.ts";

export type AdminDeps = {
  adminToken: string;
  keys: KeyStore | null;
  metrics: Metrics;
  state: () => State | null;
  submit: (event: Event) => void;
  /** The shell's monotonic clock (state times are on it). */
  now: () => number;
  /** Wall-clock ms since the epoch: key times, which outlive the process. */
  wallNow: () => number;
  /** BODY_TIMEOUT_SECS in ms. */
  bodyTimeoutMs: number;
  /** The usage ledger (issue 26); null or absent when it is off. */
  ledger?: UsageLedger | null;
  /** Cluster mode (issue 26): the usage routes answered for the whole fleet (cluster/usage_fleet.ts). */
  usageFleet?: (
    path: "/admin/usage" | "/admin/requests",
    url: URL,
    res: HttpResponse,
  ) => void;
  /** Issue 33: wrong tokens throttled per address; absent = no throttle. */
  throttle?: AuthThrottle;
};

const ADMIN_BODY_MAX = 16 * 1024;

/** A percent-decoded path segment; null when its escapes are malformed (%ZZ). */
export function decodeSegment(raw: string): string | null {
  try {
    return decodeURIComponent(raw);
  } catch {
    return null;
  }
}

function badSegment(res: HttpResponse, raw: string): void {
  replyError(res, apiError("invalid_path", { segment: raw }));
}

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

/** The original's type for a key's times: whole epoch seconds (issue 32). */
function epochSecs(ms: number | null): number | null {
  return ms === null ? null : Math.floor(ms / 1000);
}

function keyJson(k: ApiKeyInfo): Record<string, unknown> {
  return {
    id: k.id,
    name: k.name,
    created_at: epochSecs(k.createdAtMs),
    last_used_at: epochSecs(k.lastUsedAtMs),
    created_at_iso: iso(k.createdAtMs),
    last_used_at_iso: iso(k.lastUsedAtMs),
    tenant: k.tenant,
    max_priority: k.maxPriority,
    may_name_tenants: k.mayNameTenants,
    prefix: k.prefix,
    rate_limit: k.rateLimit ?? null,
    token_budget: k.tokenBudget ?? null,
    // A revoked key is deleted, so every key listed is live.
    revoked: false,
  };
}

/** `tenant` and `max_priority` of a POST /admin/keys body, or what is wrong with them. */
function scopeOf(body: Record<string, unknown>): KeyScope | string {
  const tenant = body.tenant ?? null;
  if (tenant !== null && (typeof tenant !== "string" || !isTenantId(tenant))) {
    return `"tenant" must be ${TENANT_RULE} (as X-Tenant-ID), or absent (the key is then its own tenant, or names tenants with "may_name_tenants": true)`;
  }
  const maxPriority = body.max_priority ?? "normal";
  if (typeof maxPriority !== "string" || !isPriority(maxPriority)) {
    return '"max_priority" must be high, normal or low (default normal)';
  }
  const mayNameTenants = body.may_name_tenants ?? false;
  if (typeof mayNameTenants !== "boolean") {
    return '"may_name_tenants" must be true or false (default false)';
  }
  if (mayNameTenants && tenant !== null) {
    return 'a key bound to a "tenant" cannot have "may_name_tenants": it is that tenant';
  }
  return { tenant, maxPriority, mayNameTenants };
}

/** `rate_limit` and `token_budget` of a POST /admin/keys body (issue 26), or what is wrong with them. */
function limitsOf(body: Record<string, unknown>): KeyLimitsText | string {
  const rateLimit = body.rate_limit ?? null;
  const tokenBudget = body.token_budget ?? null;
  if (rateLimit !== null && typeof rateLimit !== "string") {
    return '"rate_limit" must be a string like "100req/min,20000tok/min"';
  }
  if (tokenBudget !== null && typeof tokenBudget !== "string") {
    return '"token_budget" must be a string like "5000000tok/day"';
  }
  try {
    parseKeyLimits({ rateLimit, tokenBudget });
  } catch (e) {
    return (e as Error).message;
  }
  return { rateLimit, tokenBudget };
}

/** The JSON body (empty = {}); size and time bounds refuse in readBody. */
function readAdminJson(
  req: HttpRequest,
  res: HttpResponse,
  timeoutMs: number,
  onDone: (value: unknown, error: string | null) => void,
): void {
  readJsonBody(
    req,
    res,
    { maxBytes: ADMIN_BODY_MAX, timeoutMs, emptyIsObject: true },
    (body) =>
      body.kind === "json"
        ? onDone(body.value, null)
        : onDone(null, "body is not valid JSON"),
    (e) => replyError(res, e),
  );
}

/** The admin token checked: false (and the 403 sent) when it is unset, missing or wrong. */
function adminAdmitted(
  req: HttpRequest,
  res: HttpResponse,
  deps: AdminDeps,
): boolean {
  if (deps.adminToken === "") {
    req.resume();
    replyError(res, apiError("admin_disabled"));
    return false;
  }
  // Issue 32: the original also takes the token bare, without `Bearer `.
  const check = bearerCheck(req, deps.adminToken, { bare: true });
  const waitSecs = check === "missing"
    ? null
    : deps.throttle?.refusedForSecs("admin", req) ?? null;
  if (waitSecs !== null) {
    req.resume();
    sendThrottled(res, waitSecs);
    return false;
  }
  if (check === "ok") return true;
  req.resume();
  deps.metrics.authFailure("admin_token");
  if (check === "wrong") deps.throttle?.failed("admin", req);
  replyError(
    res,
    apiError(
      check === "missing" ? "missing_admin_token" : "invalid_admin_token",
    ),
  );
  return false;
}

/** GET /admin/workers: every worker, with wall-clock times beside the monotonic ones. */
function listWorkers(res: HttpResponse, state: State, deps: AdminDeps): void {
  const now = deps.now();
  const wall = (monotonicMs: number) => deps.wallNow() - (now - monotonicMs);
  sendJson(res, 200, {
    workers: workerViews(state).map((w) => ({
      ...w,
      // The original's names for the same facts (issue 32), beside ours.
      worker_id: w.id,
      worker_name: w.name,
      in_flight_count: w.in_flight,
      is_draining: w.draining,
      connected_since: iso(wall(w.connected_at_ms)),
      connected_secs: Math.round((now - w.connected_at_ms) / 1000),
      last_heartbeat: iso(wall(w.last_heartbeat_at_ms)),
      last_heartbeat_secs_ago: Math.round(
        (now - w.last_heartbeat_at_ms) / 1000,
      ),
    })),
  });
}

/**
 * /admin/stats in the original's shape, ours beside it (issue 32): a script
 * written for the original reads `queue_depth` as a map by provider and
 * `active_workers`; the total depth moves to `queue_depth_total`.
 */
function originalStats(ours: Record<string, unknown>): Record<string, unknown> {
  return {
    ...ours,
    queue_depth: ours.queue_depth_by_provider,
    queue_depth_total: ours.queue_depth,
    active_workers: ours.workers_connected,
  };
}

/** POST /admin/workers/{id}/drain: the core drains it; 202 at once. */
function drainWorker(
  res: HttpResponse,
  state: State,
  deps: AdminDeps,
  rawId: string,
): void {
  const id = decodeSegment(rawId);
  if (id === null) return badSegment(res, rawId);
  const worker = state.workers.get(id);
  if (worker === undefined) {
    return replyError(res, apiError("worker_not_found", { id }));
  }
  deps.submit({
    kind: "workerDrainRequested",
    atMs: deps.now(),
    workerId: id,
    reason: "drained by an operator (POST /admin/workers/{id}/drain)",
  });
  sendJson(res, 202, {
    id,
    name: worker.name,
    draining: true,
    in_flight: worker.inFlight.size,
  });
}

/** Handles /admin and /admin/*; false for any other path. */
export function handleAdmin(
  req: HttpRequest,
  res: HttpResponse,
  url: URL,
  deps: AdminDeps,
): boolean {
  const path = url.pathname;
  if (path !== "/admin" && !path.startsWith("/admin/")) return false;
  if (!adminAdmitted(req, res, deps)) return true;
  const state = deps.state();
  if (state === null) {
    req.resume();
    replyError(res, apiError("starting"));
    return true;
  }
  const method = req.method ?? "GET";
  const only = (allowed: string): boolean => {
    if (method === allowed) return true;
    req.resume();
    replyError(res, apiError("method_not_allowed", { use: allowed, path }), {
      allow: allowed,
    });
    return false;
  };

  if (path === "/admin/workers") {
    if (only("GET")) listWorkers(res, state, deps);
    return true;
  }
  const drain = /^\/admin\/workers\/([^/]+)\/drain$/.exec(path);
  if (drain !== null) {
    if (!only("POST")) return true;
    req.resume();
    drainWorker(res, state, deps, drain[1]!);
    return true;
  }
  if (path === "/admin/stats") {
    if (!only("GET")) return true;
    sendJson(res, 200, originalStats(deps.metrics.stats(state, deps.now())));
    return true;
  }
  if (path === "/admin/usage" || path === "/admin/requests") {
    if (!only("GET")) return true;
    req.resume();
    const ledger = deps.ledger ?? null;
    if (ledger !== null && deps.usageFleet !== undefined) {
      deps.usageFleet(path, url, res);
    } else if (path === "/admin/usage") {
      sendUsage(res, url, ledger, deps.wallNow());
    } else sendRequests(res, url, ledger);
    return true;
  }
  if (path === "/admin/keys" || path.startsWith("/admin/keys/")) {
    return handleKeys(req, res, path, method, deps);
  }
  req.resume();
  replyError(res, apiError("not_found", { method, path }));
  return true;
}

/** POST /admin/keys: a new key, its secret shown this once. */
function createKey(
  req: HttpRequest,
  res: HttpResponse,
  deps: AdminDeps,
  keys: KeyStore,
  fail: (e: unknown) => void,
): void {
  readAdminJson(req, res, deps.bodyTimeoutMs, (value, error) => {
    if (error !== null) {
      return replyError(res, apiError("invalid_body", { detail: error }));
    }
    const name = (value as { name?: unknown } | null)?.name;
    if (
      typeof name !== "string" || name.trim() === "" ||
      name.length > KEY_NAME_MAX
    ) {
      return replyError(
        res,
        apiError("invalid_name", {
          detail:
            `send {"name": "..."}: a non-empty name of at most ${KEY_NAME_MAX} characters`,
        }),
      );
    }
    const scope = scopeOf(value as Record<string, unknown>);
    if (typeof scope === "string") {
      return replyError(res, apiError("invalid_scope", { detail: scope }));
    }
    const limits = limitsOf(value as Record<string, unknown>);
    if (typeof limits === "string") {
      return replyError(res, apiError("invalid_limit", { detail: limits }));
    }
    try {
      const k = keys.create(name.trim(), deps.wallNow(), scope, limits);
      // The original's fields (`secret`, `prefix`, `revoked`); `key` too,
      // which this relay's earlier releases returned.
      sendJson(res, 201, {
        ...keyJson(k),
        secret: k.key,
        key: k.key,
        note:
          "store this key now: it is shown only once; clients send it as Authorization: Bearer <key>",
      });
    } catch (e) {
      fail(e);
    }
  });
}

function handleKeys(
  req: HttpRequest,
  res: HttpResponse,
  path: string,
  method: string,
  deps: AdminDeps,
): boolean {
  const keys = deps.keys;
  if (keys === null) {
    req.resume();
    replyError(res, apiError("keys_unavailable"));
    return true;
  }
  const fail = (e: unknown) => {
    replyError(
      res,
      apiError("key_store_error", { why: (e as Error).message }),
    );
  };
  if (path === "/admin/keys") {
    if (method === "GET") {
      req.resume();
      try {
        sendJson(res, 200, { keys: keys.list().map(keyJson) });
      } catch (e) {
        fail(e);
      }
      return true;
    }
    if (method === "POST") {
      createKey(req, res, deps, keys, fail);
      return true;
    }
    req.resume();
    replyError(
      res,
      apiError("method_not_allowed", { use: "GET or POST", path }),
      { allow: "GET, POST" },
    );
    return true;
  }
  const m = /^\/admin\/keys\/([^/]+)$/.exec(path);
  req.resume();
  if (m === null) {
    replyError(res, apiError("not_found", { method, path }));
    return true;
  }
  if (method !== "DELETE") {
    replyError(
      res,
      apiError("method_not_allowed", { use: "DELETE", path }),
      { allow: "DELETE" },
    );
    return true;
  }
  const id = decodeSegment(m[1]!);
  if (id === null) {
    badSegment(res, m[1]!);
    return true;
  }
  try {
    // The original's answer: 204 and no body (issue 32).
    if (keys.revoke(id)) {
      res.writeHead(204, { "cache-control": "no-store" }).end();
    } else replyError(res, apiError("key_not_found", { id }));
  } catch (e) {
    fail(e);
  }
  return true;
}
