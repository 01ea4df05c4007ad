// Fleet-wide usage answers (issue 26, cluster mode): each instance writes the
// records of the requests whose client it held into its own SQLite file, so
// the answer for the fleet is the merge of every instance's part. These are
// the pure merges: sums for /admin/usage, a merge by time for /admin/requests
// with a cursor that means the same on every instance.
import type {
  GroupBy,
  TimeCursor,
  UsageGroup,
  UsageRecord,
  UsageTotals,
} from "./usage_ledger.ts";

export type UsagePart = { totals: UsageTotals; groups: UsageGroup[] };

const TOTAL_FIELDS = [
  "requests",
  "errors",
  "prompt_tokens",
  "completion_tokens",
  "cached_tokens",
  "estimated_requests",
] as const satisfies readonly (keyof UsageTotals)[];

function zero(): UsageTotals {
  return {
    requests: 0,
    errors: 0,
    prompt_tokens: 0,
    completion_tokens: 0,
    cached_tokens: 0,
    estimated_requests: 0,
  };
}

function addInto(into: UsageTotals, t: UsageTotals): void {
  for (const f of TOTAL_FIELDS) into[f] += Number(t[f] ?? 0);
}

/** The larger of two names, as SQL's MAX: null only when both are. */
function maxName(a: unknown, b: unknown): string | null {
  if (typeof a !== "string") return typeof b === "string" ? b : null;
  if (typeof b !== "string") return a;
  return a > b ? a : b;
}

/** The ledger's group order: most requests first, then the group (null first), as its SQL. */
function groupOrder(groupBy: GroupBy) {
  return (a: UsageGroup, b: UsageGroup): number => {
    if (a.requests !== b.requests) return b.requests - a.requests;
    const ga = a[groupBy] as string | null;
    const gb = b[groupBy] as string | null;
    if (ga === gb) return 0;
    if (ga === null) return -1;
    if (gb === null) return 1;
    return ga < gb ? -1 : 1;
  };
}

/** The sum of every instance's /admin/usage part: totals, and each group across instances. */
export function mergeUsage(groupBy: GroupBy, parts: UsagePart[]): UsagePart {
  const totals = zero();
  const byGroup = new Map<string | null, UsageGroup>();
  for (const p of parts) {
    addInto(totals, p.totals);
    for (const g of p.groups) {
      const name = (g[groupBy] ?? null) as string | null;
      let into = byGroup.get(name);
      if (into === undefined) {
        into = { [groupBy]: name, ...zero() } as UsageGroup;
        if (groupBy === "key") into.key_name = null;
        byGroup.set(name, into);
      }
      addInto(into, g);
      if (groupBy === "key") into.key_name = maxName(into.key_name, g.key_name);
    }
  }
  return {
    totals,
    groups: [...byGroup.values()].sort(groupOrder(groupBy)),
  };
}

/** Newest first, then the higher request id: the order of every instance's requestsByTime. */
export function newestFirst(a: UsageRecord, b: UsageRecord): number {
  const ta = Date.parse(a.at);
  const tb = Date.parse(b.at);
  if (ta !== tb) return tb - ta;
  return a.request_id === b.request_id
    ? 0
    : a.request_id < b.request_id
    ? 1
    : -1;
}

/** The cursor after a record: `<unix ms>:<request id>`, the same on every instance. */
export function timeCursorOf(r: UsageRecord): string {
  return `${Date.parse(r.at)}:${r.request_id}`;
}

export function parseTimeCursor(raw: string): TimeCursor | null {
  const m = /^(\d+):(.+)$/.exec(raw);
  return m === null ? null : { atMs: Number(m[1]), requestId: m[2]! };
}

/**
 * One fleet page from each instance's page (each up to `limit + 1` records
 * after the same cursor, in the same order): the newest `limit` of them all,
 * and a cursor when any instance has more.
 */
export function mergeRequests<R extends UsageRecord>(
  pages: R[][],
  limit: number,
): { records: R[]; nextCursor: string | null } {
  const all = pages.flat().sort(newestFirst);
  const records = all.slice(0, limit);
  const more = all.length > limit;
  return {
    records,
    nextCursor: more ? timeCursorOf(records[records.length - 1]!) : null,
  };
}
