// Spec 004 request headers: who is asking (X-Tenant-ID, or the API key's
// tenant), how urgent (X-Priority, capped by the key) and which cache to reuse
// (X-Cache-Mode, X-Cache-Tag). Validation only; the scheduling they drive is in
// the core.
import type { HttpRequest } from "../door/exchange.ts";
import {
  apiError,
  type ClientError,
  type Priority,
} from "../../../core/mod.ts";

export type Tenancy = {
  tenant: string;
  priority: Priority;
  cacheKey: string | null;
};

const TENANT = /^[A-Za-z0-9._:-]{1,64}$/;
export const TENANT_RULE = "1-64 characters of A-Z a-z 0-9 . _ : -";
const PRIORITIES = new Set(["high", "normal", "low"]);
const CACHE_MODES = new Set(["prefix", "none", "auto"]);
/** Higher is more urgent; a key's ceiling caps X-Priority by this order. */
const RANK: Record<Priority, number> = { low: 0, normal: 1, high: 2 };

export function isTenantId(s: string): boolean {
  return TENANT.test(s);
}

export function isPriority(s: string): s is Priority {
  return PRIORITIES.has(s);
}

/** What the client's API key allows; null when keys are not required (headers are believed). */
export type KeyGrant = { tenant: string | null; maxPriority: Priority };

function header(req: HttpRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * 403 when a key bound to `bound` names another (well-formed) tenant in
 * X-Tenant-ID. `ownTenant`: the key has no tenant of its own and is bound to
 * itself (issue 24), which the message says.
 */
export function tenantMismatch(
  req: HttpRequest,
  bound: string | null,
  ownTenant = false,
): ClientError | null {
  const claimed = header(req, "x-tenant-id");
  if (
    bound === null || claimed === undefined || claimed === bound ||
    !TENANT.test(claimed)
  ) return null;
  return apiError("tenant_mismatch", {
    detail: ownTenant
      ? `this API key has no tenant and is its own tenant ("${bound}"): it cannot act as X-Tenant-ID "${claimed}"; drop the header, use that tenant's key, or a key created with "may_name_tenants": true`
      : `this API key belongs to tenant "${bound}" and cannot act as X-Tenant-ID "${claimed}"; drop the header or use that tenant's key`,
  });
}

/**
 * Reads the spec 004 headers. `grant` is what the client's API key allows: a key
 * bound to a tenant is that tenant (another X-Tenant-ID is refused, never
 * believed), and X-Priority above the key's ceiling is lowered to it.
 */
export function readTenancy(
  req: HttpRequest,
  body: Record<string, unknown>,
  grant: KeyGrant | null,
  multiTenant = true,
): Tenancy | ClientError {
  let tenant = "default";
  // ENABLE_MULTI_TENANT=false (issue 32): one tenant; the header is not read.
  if (multiTenant) {
    const claimed = header(req, "x-tenant-id");
    if (claimed !== undefined && !TENANT.test(claimed)) {
      return apiError("invalid_tenant", { rule: TENANT_RULE });
    }
    const bound = grant?.tenant ?? null;
    const mismatch = tenantMismatch(req, bound);
    if (mismatch !== null) return mismatch;
    tenant = bound ?? claimed ?? "default";
  }
  const asked = (header(req, "x-priority") ?? "normal").toLowerCase();
  if (!isPriority(asked)) {
    return apiError("invalid_priority");
  }
  const priority = grant !== null && RANK[asked] > RANK[grant.maxPriority]
    ? grant.maxPriority
    : asked;
  const mode = (header(req, "x-cache-mode") ?? "auto").toLowerCase();
  if (!CACHE_MODES.has(mode)) {
    return apiError("invalid_cache_mode");
  }
  const tag = header(req, "x-cache-tag");
  if (tag !== undefined && tag.length > 64) {
    return apiError("invalid_cache_tag");
  }
  let cacheKey: string | null = null;
  if (mode !== "none") {
    // A session key a client already sends works as a cache tag too.
    const metadata = body.metadata as Record<string, unknown> | undefined;
    const candidates = [
      tag,
      body.prompt_cache_key,
      body.user,
      metadata?.user_id,
    ];
    for (const c of candidates) {
      if (typeof c === "string" && c !== "") {
        cacheKey = c.slice(0, 256);
        break;
      }
    }
  }
  return { tenant, priority, cacheKey };
}

/** Response headers the spec asks for even when the backend sent none. */
export const CACHE_HEADER_DEFAULTS: Record<string, string> = {
  "x-cache-hit": "false",
  "x-cache-tokens-reused": "0",
  "x-gpu-time-ms": "0",
};
