// GET /admin/usage and GET /admin/requests (issue 26): the usage ledger read
// back. Behind the admin token (admin.ts checks it before routing here).
import type { HttpResponse } from "../door/exchange.ts";
import { apiError, type ClientError } from "../../../core/mod.ts";
import { replyError, sendJson } from "../http/http_reply.ts";
import {
  type GroupBy,
  GROUPS,
  type RequestFilter,
  type UsageLedger,
} from "./usage_ledger.ts";

export const REQUESTS_LIMIT_MAX = 1000;
export const REQUESTS_LIMIT_DEFAULT = 100;
const DAY_MS = 86_400_000;
const OUTCOMES = new Set(["completed", "failed", "cancelled", "rejected"]);

/** The largest time a Date holds (ECMA-262): past it, `toISOString` throws. */
const DATE_MS_MAX = 8.64e15;

/**
 * A time given as RFC 3339 or unix seconds (fractions allowed), in ms; null
 * when neither, when a field is out of its calendar range (`Date.parse` takes
 * 2026-02-30 as March 2), or past what a Date holds (issue 33.11: a 500).
 */
export function parseTime(raw: string): number | null {
  const t = raw.trim();
  if (/^\d+(\.\d+)?$/.test(t)) {
    const ms = Math.round(Number(t) * 1000);
    return ms <= DATE_MS_MAX ? ms : null;
  }
  // RFC 3339: a date, a time, and a zone (Z or an offset).
  const m =
    /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$/
      .exec(t);
  if (m === null) return null;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number);
  const daysInMonth = new Date(Date.UTC(year!, month!, 0)).getUTCDate();
  if (
    month! < 1 || month! > 12 || day! < 1 || day! > daysInMonth ||
    hour! > 23 || minute! > 59 || second! > 59 ||
    Number(m[9] ?? 0) > 23 || Number(m[10] ?? 0) > 59
  ) return null;
  const ms = Date.parse(t);
  return Number.isNaN(ms) ? null : ms;
}

export function disabled(res: HttpResponse): void {
  replyError(res, apiError("usage_ledger_disabled"));
}

/** A usage query's range (both ends in ms, `to` included) and grouping. */
export type UsageQuery = { groupBy: GroupBy; fromMs: number; toMs: number };

/** What is wrong with a query: the admin error to answer. */
export type QueryError = {
  code: "invalid_group_by" | "invalid_from" | "invalid_to" | "invalid_range";
  message: string;
};

function queryError(code: QueryError["code"], message: string): QueryError {
  return { code, message };
}

/** A usage query's error from the catalogue, its validator's words as its message. */
export function queryErrorOf(q: QueryError): ClientError {
  return apiError(q.code, { detail: q.message });
}

/** The query of GET /admin/usage, `from` and `to` defaulting to the last 24 hours before `wallNow`. */
export function usageQuery(
  q: URLSearchParams,
  wallNow: number,
): UsageQuery | QueryError {
  const groupBy = q.get("group_by") ?? "tenant";
  if (!(GROUPS as readonly string[]).includes(groupBy)) {
    return queryError(
      "invalid_group_by",
      `group_by must be one of ${GROUPS.join(", ")}`,
    );
  }
  const range: number[] = [];
  for (
    const [name, fallback] of [["from", wallNow - DAY_MS], [
      "to",
      wallNow,
    ]] as const
  ) {
    const raw = q.get(name);
    const ms = raw === null ? fallback : parseTime(raw);
    if (ms === null) {
      return queryError(
        name === "from" ? "invalid_from" : "invalid_to",
        `${name} must be an RFC 3339 time (2026-11-25T10:00:00Z) or unix seconds`,
      );
    }
    range.push(ms);
  }
  const [fromMs, toMs] = range as [number, number];
  if (toMs < fromMs) {
    return queryError("invalid_range", "to is before from");
  }
  return { groupBy: groupBy as GroupBy, fromMs, toMs };
}

/** The JSON of GET /admin/usage for a query and its sums. */
export function usageBody(
  query: UsageQuery,
  part: { totals: unknown; groups: unknown },
): Record<string, unknown> {
  return {
    from: new Date(query.fromMs).toISOString(),
    to: new Date(query.toMs).toISOString(),
    group_by: query.groupBy,
    totals: part.totals,
    groups: part.groups,
  };
}

/** GET /admin/usage?group_by=key|tenant|model|worker&from=&to= */
export function sendUsage(
  res: HttpResponse,
  url: URL,
  ledger: UsageLedger | null,
  wallNow: number,
): void {
  if (ledger === null) return disabled(res);
  const query = usageQuery(url.searchParams, wallNow);
  if ("code" in query) {
    return replyError(res, queryErrorOf(query));
  }
  // `to` is included: a record stamped at the very instant counts.
  const part = ledger.usage(query.groupBy, query.fromMs, query.toMs + 1);
  sendJson(res, 200, usageBody(query, part));
}

/** The filter of GET /admin/requests, or what is wrong with it. */
export function requestFilter(q: URLSearchParams): RequestFilter | string {
  const f: RequestFilter = { limit: REQUESTS_LIMIT_DEFAULT };
  const limit = q.get("limit");
  if (limit !== null) {
    if (!/^\d+$/.test(limit) || Number(limit) < 1) {
      return `limit must be a whole number from 1 to ${REQUESTS_LIMIT_MAX}`;
    }
    f.limit = Math.min(Number(limit), REQUESTS_LIMIT_MAX);
  }
  const cursor = q.get("cursor");
  if (cursor !== null) {
    if (!/^\d+$/.test(cursor)) {
      return "cursor must be the next_cursor of the previous page";
    }
    f.before = Number(cursor);
  }
  for (const name of ["key", "tenant", "model"] as const) {
    const v = q.get(name);
    if (v !== null) f[name] = v;
  }
  const status = q.get("status");
  if (status !== null) {
    if (/^\d{3}$/.test(status)) f.status = Number(status);
    else if (OUTCOMES.has(status)) f.outcome = status;
    else {
      return "status must be an HTTP status (429) or an outcome (completed, failed, cancelled, rejected)";
    }
  }
  return f;
}

/** GET /admin/requests?key=&tenant=&model=&status=&limit=&cursor= (newest first). */
export function sendRequests(
  res: HttpResponse,
  url: URL,
  ledger: UsageLedger | null,
): void {
  if (ledger === null) return disabled(res);
  const filter = requestFilter(url.searchParams);
  if (typeof filter === "string") {
    return replyError(res, apiError("invalid_query", { detail: filter }));
  }
  const { records, nextCursor } = ledger.requests(filter);
  sendJson(res, 200, { requests: records, next_cursor: nextCursor });
}
