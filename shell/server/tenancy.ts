// Spec 004 request headers: who is asking (X-Tenant-ID), how urgent (X-Priority)
// and which cache to reuse (X-Cache-Mode, X-Cache-Tag). Validation only; the
// scheduling they drive is in the core.
import type { IncomingMessage } from "node:http";
import type { ClientError, Priority } from "../../core/mod.ts";

export type Tenancy = {
  tenant: string;
  priority: Priority;
  cacheKey: string | null;
};

const TENANT = /^[A-Za-z0-9._:-]{1,64}$/;
const PRIORITIES = new Set(["high", "normal", "low"]);
const CACHE_MODES = new Set(["prefix", "none", "auto"]);

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function invalid(code: string, message: string): ClientError {
  return { status: 400, code, message };
}

/** Reads the spec 004 headers; `keyTenant` is the tenant bound to the client's API key. */
export function readTenancy(
  req: IncomingMessage,
  body: Record<string, unknown>,
  keyTenant: string | null,
): Tenancy | ClientError {
  const tenant = header(req, "x-tenant-id") ?? keyTenant ?? "default";
  if (!TENANT.test(tenant)) {
    return invalid(
      "invalid_tenant",
      "X-Tenant-ID must be 1-64 characters of A-Z a-z 0-9 . _ : -",
    );
  }
  const priority = (header(req, "x-priority") ?? "normal").toLowerCase();
  if (!PRIORITIES.has(priority)) {
    return invalid(
      "invalid_priority",
      "X-Priority must be high, normal or low",
    );
  }
  const mode = (header(req, "x-cache-mode") ?? "auto").toLowerCase();
  if (!CACHE_MODES.has(mode)) {
    return invalid(
      "invalid_cache_mode",
      "X-Cache-Mode must be prefix, none or auto",
    );
  }
  const tag = header(req, "x-cache-tag");
  if (tag !== undefined && tag.length > 64) {
    return invalid(
      "invalid_cache_tag",
      "X-Cache-Tag must be at most 64 characters",
    );
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
  return { tenant, priority: priority as Priority, cacheKey };
}

/** Response headers the spec asks for even when the backend sent none. */
export const CACHE_HEADER_DEFAULTS: Record<string, string> = {
  "x-cache-hit": "false",
  "x-cache-tokens-reused": "0",
  "x-gpu-time-ms": "0",
};
