// Fleet-wide usage queries (issue 26, cluster mode). Each record is written
// once, into the SQLite file of the instance that held the client; so the
// instance asked for /admin/usage or /admin/requests asks every other live
// instance for its part, over HTTP at the address it advertises in the log
// (CLUSTER_ADVERTISE_URL), authenticated with the cluster secret, and merges
// (ops/usage_merge.ts). An instance that does not answer within
// FLEET_QUERY_TIMEOUT_MS is named in `missing_instances`: the answer is then
// partial, and says so, rather than failing or waiting for a dead peer.
import type { HttpRequest, HttpResponse } from "../door/exchange.ts";
import { replyError, sendJson } from "../http/http_reply.ts";
import { apiError } from "../../../core/protocol/errors.ts";
import { bearerCheck } from "../secret.ts";
import type { Logger } from "../../log.ts";
import {
  type GroupBy,
  GROUPS,
  type TimeCursor,
  type UsageLedger,
  type UsageRecord,
} from "../ops/usage_ledger.ts";
import {
  queryErrorOf,
  requestFilter,
  usageBody,
  usageQuery,
} from "../ops/usage_http.ts";
import {
  mergeRequests,
  mergeUsage,
  parseTimeCursor,
  type UsagePart,
} from "../ops/usage_merge.ts";

/** The routes one instance answers for another, from its own file only. */
export const PEER_USAGE_PATH = "/_relay/usage";
export const PEER_REQUESTS_PATH = "/_relay/requests";
/** How long the asked instance waits for each peer's part. */
export const FLEET_QUERY_TIMEOUT_MS = 3_000;

/** What the fan-out needs of the cluster runtime. */
export type FleetView = {
  self(): string;
  /** Every other live instance, with its advertised address when known. */
  peers(): { id: string; url: string | undefined }[];
  secret(): string;
};

export type FleetUsageDeps = {
  ledger: UsageLedger;
  fleet: FleetView;
  log: Logger;
  timeoutMs?: number;
};

/** A record as the fleet lists it: which instance's file holds it. */
export type FleetRecord = UsageRecord & { instance: string };

type Parts<T> = { parts: { instance: string; value: T }[]; missing: string[] };

/** Asks every peer `path?query` (and this instance through `local`); a peer that fails or is late is missing. */
async function askFleet<T>(
  d: FleetUsageDeps,
  path: string,
  query: URLSearchParams,
  valid: (body: unknown) => body is T,
  local: () => T,
): Promise<Parts<T>> {
  const out: Parts<T> = {
    parts: [{ instance: d.fleet.self(), value: local() }],
    missing: [],
  };
  const timeoutMs = d.timeoutMs ?? FLEET_QUERY_TIMEOUT_MS;
  await Promise.all(
    d.fleet.peers().map(async ({ id, url }) => {
      try {
        if (url === undefined) throw new Error("no advertised address yet");
        const r = await fetch(`${url}${path}?${query}`, {
          headers: { authorization: `Bearer ${d.fleet.secret()}` },
          signal: AbortSignal.timeout(timeoutMs),
        });
        const body: unknown = await r.json();
        if (r.status !== 200 || !valid(body)) {
          throw new Error(`answered ${r.status}`);
        }
        out.parts.push({ instance: id, value: body });
      } catch (e) {
        d.log("warn", "a cluster instance's usage part is missing", {
          instance: id,
          error: String(e),
        });
        out.missing.push(id);
      }
    }),
  );
  out.missing.sort();
  return out;
}

/**
 * The instances to ask besides `self`, once per address: an instance that
 * rejoined under a new id may still be listed under its old one until the
 * log declares that dead, and asking the same process twice (or itself)
 * would count its records twice. Of ids sharing an address, the one heard
 * from last is kept.
 */
export function peersToAsk(
  instances: ReadonlyMap<string, { lastSeenMs: number; peerUrl?: string }>,
  self: string,
): { id: string; url: string | undefined }[] {
  const selfUrl = instances.get(self)?.peerUrl;
  const byUrl = new Map<string, { id: string; lastSeenMs: number }>();
  const out: { id: string; url: string | undefined }[] = [];
  for (const [id, v] of instances) {
    if (id === self) continue;
    if (v.peerUrl === undefined) {
      out.push({ id, url: undefined });
      continue;
    }
    if (v.peerUrl === selfUrl) continue;
    const seen = byUrl.get(v.peerUrl);
    if (seen === undefined || v.lastSeenMs > seen.lastSeenMs) {
      byUrl.set(v.peerUrl, { id, lastSeenMs: v.lastSeenMs });
    }
  }
  for (const [url, { id }] of byUrl) out.push({ id, url });
  return out;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null;

function isUsagePart(v: unknown): v is UsagePart {
  return isObject(v) && isObject(v.totals) && Array.isArray(v.groups);
}

function isRecords(v: unknown): v is { requests: UsageRecord[] } {
  return isObject(v) && Array.isArray(v.requests) &&
    v.requests.every((r) =>
      isObject(r) && typeof r.at === "string" &&
      typeof r.request_id === "string"
    );
}

/** GET /admin/usage in cluster mode: every live instance's sums, added. */
export async function sendFleetUsage(
  res: HttpResponse,
  url: URL,
  d: FleetUsageDeps,
  wallNow: number,
): Promise<void> {
  const query = usageQuery(url.searchParams, wallNow);
  if ("code" in query) {
    return replyError(res, queryErrorOf(query));
  }
  // The range goes to the peers as this instance resolved it: every part
  // covers the same milliseconds whatever the peers' clocks say.
  const peerQuery = new URLSearchParams({
    group_by: query.groupBy,
    from_ms: String(query.fromMs),
    to_ms: String(query.toMs),
  });
  const { parts, missing } = await askFleet(
    d,
    PEER_USAGE_PATH,
    peerQuery,
    isUsagePart,
    () => d.ledger.usage(query.groupBy, query.fromMs, query.toMs + 1),
  );
  const merged = mergeUsage(query.groupBy, parts.map((p) => p.value));
  sendJson(res, 200, {
    ...usageBody(query, merged),
    missing_instances: missing,
  });
}

/** The filter and the fleet cursor of a requests query, or what is wrong with it. */
function fleetFilter(
  q: URLSearchParams,
): { filter: ReturnType<typeof requestFilter>; after: TimeCursor | null } {
  const rest = new URLSearchParams(q);
  const raw = rest.get("cursor");
  rest.delete("cursor");
  const filter = requestFilter(rest);
  if (raw === null) return { filter, after: null };
  const after = parseTimeCursor(raw);
  return after === null
    ? {
      filter: "cursor must be the next_cursor of the previous page",
      after: null,
    }
    : { filter, after };
}

/** GET /admin/requests in cluster mode: every live instance's newest, merged by time. */
export async function sendFleetRequests(
  res: HttpResponse,
  url: URL,
  d: FleetUsageDeps,
): Promise<void> {
  const { filter, after } = fleetFilter(url.searchParams);
  if (typeof filter === "string") {
    return replyError(res, apiError("invalid_query", { detail: filter }));
  }
  const { parts, missing } = await askFleet(
    d,
    PEER_REQUESTS_PATH,
    url.searchParams,
    isRecords,
    () => ({
      requests: d.ledger.requestsByTime(
        { ...filter, limit: filter.limit + 1 },
        after,
      ),
    }),
  );
  const pages = parts.map((p) =>
    p.value.requests.map((r) => ({ ...r, instance: p.instance }))
  );
  const { records, nextCursor } = mergeRequests<FleetRecord>(
    pages,
    filter.limit,
  );
  sendJson(res, 200, {
    requests: records,
    next_cursor: nextCursor,
    missing_instances: missing,
  });
}

/**
 * The peer side: GET /_relay/usage and /_relay/requests, answered from this
 * instance's own file to a holder of the cluster secret. False for any other path.
 */
export function handleUsagePeer(
  req: HttpRequest,
  res: HttpResponse,
  url: URL,
  ledger: UsageLedger | null,
  secret: string,
): boolean {
  const path = url.pathname;
  if (path !== PEER_USAGE_PATH && path !== PEER_REQUESTS_PATH) return false;
  req.resume();
  if (bearerCheck(req, secret) !== "ok") {
    replyError(res, apiError("invalid_cluster_secret"));
    return true;
  }
  if (ledger === null) {
    replyError(res, apiError("usage_ledger_disabled"));
    return true;
  }
  const q = url.searchParams;
  if (path === PEER_USAGE_PATH) {
    const groupBy = q.get("group_by") ?? "";
    const fromMs = Number(q.get("from_ms"));
    const toMs = Number(q.get("to_ms"));
    if (
      !(GROUPS as readonly string[]).includes(groupBy) ||
      !Number.isFinite(fromMs) || !Number.isFinite(toMs)
    ) {
      replyError(
        res,
        apiError("invalid_query", { detail: "group_by, from_ms, to_ms" }),
      );
      return true;
    }
    sendJson(res, 200, ledger.usage(groupBy as GroupBy, fromMs, toMs + 1));
    return true;
  }
  const { filter, after } = fleetFilter(q);
  if (typeof filter === "string") {
    replyError(res, apiError("invalid_query", { detail: filter }));
    return true;
  }
  sendJson(res, 200, {
    requests: ledger.requestsByTime(
      { ...filter, limit: filter.limit + 1 },
      after,
    ),
  });
  return true;
}
