// Credentials a request presents, read and compared in one place: the bearer
// token of the admin, metrics and client-key checks, compared in constant time.
import { createHash, timingSafeEqual } from "node:crypto";

/** What carries credentials: a node:http request, or an upgrade handed over by the door (shell/ws/upgrade.ts). */
type WithHeaders = {
  headers: { authorization?: string | string[] | undefined };
};

function authorization(req: WithHeaders): string | undefined {
  const h = req.headers.authorization;
  return Array.isArray(h) ? h[0] : h;
}

/** Constant-time comparison (C1): both sides hashed first so lengths never leak. */
export function secretsEqual(given: string, expected: string): boolean {
  const a = createHash("sha256").update(given).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
}

/**
 * A token as the original's admin API also takes it (issue 32): the whole
 * `Authorization` value when it is one word with no scheme, else null.
 */
function bareToken(req: WithHeaders): string | null {
  const h = authorization(req)?.trim();
  return h === undefined || h === "" || /\s/.test(h) ? null : h;
}

/**
 * How the request's bearer token compares with `secret`: "missing" without
 * one, "ok" when it is the secret (an empty secret is never presented), else
 * "wrong". The one check behind the admin, metrics and cluster-peer tokens;
 * `bare`: a token without the `Bearer ` scheme counts too.
 */
export function bearerCheck(
  req: WithHeaders,
  secret: string,
  opts: { bare?: boolean } = {},
): "ok" | "missing" | "wrong" {
  const given = bearerToken(req) ??
    (opts.bare === true ? bareToken(req) : null);
  if (given === null) return "missing";
  return secret !== "" && secretsEqual(given, secret) ? "ok" : "wrong";
}

/** The token of an `Authorization: Bearer <token>` header, or null. */
export function bearerToken(req: WithHeaders): string | null {
  const h = authorization(req);
  if (h === undefined) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
  return m === null ? null : m[1]!;
}
