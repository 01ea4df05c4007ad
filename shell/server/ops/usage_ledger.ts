// The usage ledger (issue 26): one row per finished request in the relay's
// SQLite file (usage_records, api_keys.ts migrations). The core says what a
// request used in its `requestFinished`; this only keeps it. Records wait in
// memory and go to disk in one transaction every FLUSH_MS (or FLUSH_ROWS), off
// the request's path; a read flushes first, so an answer counts every request
// finished before it. Rows older than the retention are deleted hourly.
import type { DatabaseSync } from "node:sqlite";
import type { Effect } from "../../../core/mod.ts";
import { withoutWaiting } from "./api_keys.ts";

export type Finished = Extract<Effect, { kind: "requestFinished" }>;

/** One record as /admin/requests lists it. */
export type UsageRecord = {
  id: number;
  at: string;
  request_id: string;
  key_id: string | null;
  key_name: string | null;
  tenant: string;
  model: string;
  model_served: string;
  worker: string | null;
  endpoint: string;
  outcome: string;
  status: number;
  queue_wait_ms: number;
  first_byte_ms: number | null;
  duration_ms: number;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  cached_tokens: number | null;
  estimated: boolean;
};

export const GROUPS = ["key", "tenant", "model", "worker"] as const;
export type GroupBy = typeof GROUPS[number];

const GROUP_COLUMN: Record<GroupBy, string> = {
  key: "key_id",
  tenant: "tenant",
  // What the GPU served is what the time went to: aliases count as their target.
  model: "model_served",
  worker: "worker",
};

export type UsageTotals = {
  requests: number;
  errors: number;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
  estimated_requests: number;
};

export type UsageGroup = UsageTotals & { [k: string]: string | number | null };

export type RequestFilter = {
  key?: string;
  tenant?: string;
  model?: string;
  status?: number;
  /** completed, failed, cancelled or rejected. */
  outcome?: string;
  /** Only records older than this id (the cursor of the previous page). */
  before?: number;
  limit: number;
};

export type UsageLedger = {
  record(f: Finished, wallMs: number): void;
  flush(): void;
  usage(groupBy: GroupBy, fromMs: number, toMs: number): {
    totals: UsageTotals;
    groups: UsageGroup[];
  };
  requests(filter: RequestFilter): {
    records: UsageRecord[];
    nextCursor: string | null;
  };
  /** Cluster mode: records in the fleet's order after a cursor (see requestsByTime). */
  requestsByTime(
    filter: RequestFilter,
    after: TimeCursor | null,
  ): UsageRecord[];
  /** Deletes records older than the retention; returns how many. */
  prune(wallMs: number): number;
  close(): void;
};

export const FLUSH_MS = 1000;
/** A batch this big is written at the next turn of the event loop, not in the request's. */
export const FLUSH_ROWS = 200;
/** Rows per transaction: what waited through a lock goes in slices, one turn each. */
const WRITE_ROWS_MAX = 1000;
/**
 * Records kept while the file refuses them (locked by another connection,
 * disk full): about 25 MB at most. Past it the oldest are dropped, and counted.
 */
export const PENDING_MAX = 50_000;

const PRUNE_MS = 3_600_000;
const DAY_MS = 86_400_000;

type Pending = [Finished, number];

const COLUMNS =
  "at_ms, request_id, key_id, key_name, tenant, model, model_served, worker, endpoint, outcome, status, queue_wait_ms, first_byte_ms, duration_ms, prompt_tokens, completion_tokens, cached_tokens, estimated";

const TOTALS =
  "COUNT(*) AS requests, SUM(CASE WHEN status >= 400 THEN 1 ELSE 0 END) AS errors, COALESCE(SUM(prompt_tokens), 0) AS prompt_tokens, COALESCE(SUM(completion_tokens), 0) AS completion_tokens, COALESCE(SUM(cached_tokens), 0) AS cached_tokens, SUM(estimated) AS estimated_requests";

function totalsOf(r: Record<string, unknown>): UsageTotals {
  return {
    requests: Number(r.requests ?? 0),
    errors: Number(r.errors ?? 0),
    prompt_tokens: Number(r.prompt_tokens ?? 0),
    completion_tokens: Number(r.completion_tokens ?? 0),
    cached_tokens: Number(r.cached_tokens ?? 0),
    estimated_requests: Number(r.estimated_requests ?? 0),
  };
}

const num = (v: unknown): number | null => v === null ? null : Number(v);
const text = (v: unknown): string | null => v === null ? null : String(v);

function recordOf(r: Record<string, unknown>): UsageRecord {
  return {
    id: Number(r.id),
    at: new Date(Number(r.at_ms)).toISOString(),
    request_id: String(r.request_id),
    key_id: text(r.key_id),
    key_name: text(r.key_name),
    tenant: String(r.tenant),
    model: String(r.model),
    model_served: String(r.model_served),
    worker: text(r.worker),
    endpoint: String(r.endpoint),
    outcome: String(r.outcome),
    status: Number(r.status),
    queue_wait_ms: Number(r.queue_wait_ms),
    first_byte_ms: num(r.first_byte_ms),
    duration_ms: Number(r.duration_ms),
    prompt_tokens: num(r.prompt_tokens),
    completion_tokens: num(r.completion_tokens),
    cached_tokens: num(r.cached_tokens),
    estimated: Number(r.estimated) === 1,
  };
}

type Statement = ReturnType<DatabaseSync["prepare"]>;

/** One batch in one transaction; the error thrown is SQLite's own. */
function writeBatch(
  db: DatabaseSync,
  insert: Statement,
  batch: Pending[],
): void {
  // IMMEDIATE: a lock held elsewhere refuses the batch before any row is tried.
  db.exec("BEGIN IMMEDIATE");
  try {
    for (const [f, at] of batch) {
      const u = f.usage;
      insert.run(
        at,
        f.requestId,
        f.keyId,
        f.keyName,
        f.tenant,
        f.modelAsked,
        f.modelServed,
        f.workerName,
        f.route,
        f.outcome,
        f.status,
        Math.round(f.queueWaitMs),
        f.firstByteMs === null ? null : Math.round(f.firstByteMs),
        Math.round(f.durationMs),
        u.prompt,
        u.completion,
        u.cached,
        u.estimated ? 1 : 0,
      );
    }
    db.exec("COMMIT");
  } catch (e) {
    // SQLite rolls back by itself on some errors (a full disk): a second
    // ROLLBACK would throw and hide the error that matters.
    if (db.isTransaction) db.exec("ROLLBACK");
    throw e;
  }
}

/** Totals over [fromMs, toMs), and per group. */
function usageBetween(
  db: DatabaseSync,
  groupBy: GroupBy,
  fromMs: number,
  toMs: number,
): { totals: UsageTotals; groups: UsageGroup[] } {
  const where = "WHERE at_ms >= ? AND at_ms < ?";
  const totals = totalsOf(
    db.prepare(`SELECT ${TOTALS} FROM usage_records ${where}`).get(
      fromMs,
      toMs,
    ) ?? {},
  );
  const col = GROUP_COLUMN[groupBy];
  // A key's group carries its name too (the latest the records know).
  const name = groupBy === "key" ? ", MAX(key_name) AS key_name" : "";
  const groups = db.prepare(
    `SELECT ${col} AS g${name}, ${TOTALS} FROM usage_records ${where} GROUP BY ${col} ORDER BY requests DESC, g`,
  ).all(fromMs, toMs).map((r) => ({
    [groupBy]: text(r.g),
    ...(groupBy === "key" ? { key_name: text(r.key_name) } : {}),
    ...totalsOf(r),
  }));
  return { totals, groups };
}

/** The WHERE clauses (and their arguments) of a filter's key, tenant, model and status. */
function filterClauses(
  filter: RequestFilter,
): { clauses: string[]; args: (string | number)[] } {
  const clauses: string[] = [];
  const args: (string | number)[] = [];
  const eq = (column: string, v: string | number | undefined) => {
    if (v === undefined) return;
    clauses.push(`${column} = ?`);
    args.push(v);
  };
  eq("key_id", filter.key);
  eq("tenant", filter.tenant);
  if (filter.model !== undefined) {
    // As asked or as served: an alias finds its requests, the target all of them.
    clauses.push("(model = ? OR model_served = ?)");
    args.push(filter.model, filter.model);
  }
  eq("status", filter.status);
  eq("outcome", filter.outcome);
  return { clauses, args };
}

const whereOf = (clauses: string[]) =>
  clauses.length === 0 ? "" : `WHERE ${clauses.join(" AND ")}`;

/** One page of records, newest first, and the cursor of the next. */
function requestsPage(
  db: DatabaseSync,
  filter: RequestFilter,
): { records: UsageRecord[]; nextCursor: string | null } {
  const { clauses, args } = filterClauses(filter);
  if (filter.before !== undefined) {
    clauses.push("id < ?");
    args.push(filter.before);
  }
  // One more than asked: whether a next page exists.
  const rows = db.prepare(
    `SELECT id, ${COLUMNS} FROM usage_records ${
      whereOf(clauses)
    } ORDER BY id DESC LIMIT ?`,
  ).all(...args, filter.limit + 1).map(recordOf);
  const more = rows.length > filter.limit;
  const records = more ? rows.slice(0, filter.limit) : rows;
  return {
    records,
    nextCursor: more ? String(records[records.length - 1]!.id) : null,
  };
}

/** A place in the fleet's order (newest first by time, then by request id). */
export type TimeCursor = { atMs: number; requestId: string };

/**
 * Up to `filter.limit` records in the fleet's order, after `after` (cluster
 * mode, issue 26): the order every instance shares, since a record's local id
 * means nothing on another instance. `filter.before` is not used.
 */
function requestsByTime(
  db: DatabaseSync,
  filter: RequestFilter,
  after: TimeCursor | null,
): UsageRecord[] {
  const { clauses, args } = filterClauses(filter);
  if (after !== null) {
    clauses.push("(at_ms < ? OR (at_ms = ? AND request_id < ?))");
    args.push(after.atMs, after.atMs, after.requestId);
  }
  return db.prepare(
    `SELECT id, ${COLUMNS} FROM usage_records ${
      whereOf(clauses)
    } ORDER BY at_ms DESC, request_id DESC LIMIT ?`,
  ).all(...args, filter.limit).map(recordOf);
}

/** What the ledger tells about writes that fail (issue 33); each optional. */
export type LedgerNotes = {
  /** Records written after `failures` refused attempts. */
  recovered?: (records: number, failures: number) => void;
  /** Records dropped, the oldest first, because PENDING_MAX were waiting. */
  dropped?: (records: number) => void;
};

/**
 * The ledger on an open relay database (schema already migrated). `onError`
 * hears the first failed write of a run of failures, with SQLite's error: its
 * records are kept (at most PENDING_MAX) and written once the file takes them
 * again; the relay keeps serving meanwhile.
 */
export function openUsageLedger(
  db: DatabaseSync,
  retentionDays: number,
  onError: (e: unknown) => void,
  notes: LedgerNotes = {},
): UsageLedger {
  const insert = db.prepare(
    `INSERT INTO usage_records (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const del = db.prepare("DELETE FROM usage_records WHERE at_ms < ?");
  // A commit per batch: write-ahead logging with NORMAL sync makes it an append
  // without an fsync of the database each time (measured: (g) p99 13.6 ms with
  // the default rollback journal). The file stays consistent after a crash; the
  // last commits may be lost at a power cut.
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("PRAGMA synchronous = NORMAL");
  let pending: Pending[] = [];
  let timer: ReturnType<typeof setTimeout> | null = null;
  let lastPruneMs = 0;
  /** Refused attempts since the last write that went through. */
  let failures = 0;

  const schedule = (ms: number) => {
    if (timer !== null) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = null;
      write(false);
    }, ms);
  };
  const keepAtMost = () => {
    const over = pending.length - PENDING_MAX;
    if (over <= 0) return;
    pending.splice(0, over);
    notes.dropped?.(over);
  };
  /** Writes what waits, a slice per turn; false when the file refused it. */
  const writePending = (): boolean => {
    const batch = pending.slice(0, WRITE_ROWS_MAX);
    try {
      withoutWaiting(db, () => writeBatch(db, insert, batch));
    } catch (e) {
      if (failures++ === 0) onError(e);
      return false;
    }
    pending.splice(0, batch.length);
    if (failures > 0) {
      notes.recovered?.(batch.length, failures);
      failures = 0;
    }
    return true;
  };

  /**
   * What waits, to disk: all of it for a flush (a read counts every finished
   * request), one slice per turn from the timer. Refused: tried again in
   * FLUSH_MS, without waiting then either.
   */
  const write = (all: boolean) => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    if (pending.length === 0 || !db.isOpen) return;
    const now = pending[pending.length - 1]![1];
    do {
      if (!writePending()) return schedule(FLUSH_MS);
    } while (all && pending.length > 0);
    if (pending.length > 0) return schedule(0);
    if (now - lastPruneMs >= PRUNE_MS) ledger.prune(now);
  };

  const ledger: UsageLedger = {
    record(f, wallMs) {
      pending.push([f, wallMs]);
      keepAtMost();
      const due = pending.length >= FLUSH_ROWS && failures === 0;
      if (timer !== null && !due) return;
      schedule(due ? 0 : FLUSH_MS);
    },
    flush() {
      write(true);
    },
    usage(groupBy, fromMs, toMs) {
      ledger.flush();
      return usageBetween(db, groupBy, fromMs, toMs);
    },
    requests(filter) {
      ledger.flush();
      return requestsPage(db, filter);
    },
    requestsByTime(filter, after) {
      ledger.flush();
      return requestsByTime(db, filter, after);
    },
    prune(wallMs) {
      if (!db.isOpen) return 0;
      try {
        const cutoff = wallMs - retentionDays * DAY_MS;
        const gone = withoutWaiting(db, () => del.run(cutoff).changes);
        lastPruneMs = wallMs;
        return Number(gone);
      } catch (e) {
        onError(e);
        return 0; // tried again at the next flush
      }
    },
    close() {
      // At the end, waiting for a lock stalls nothing: one last try with it.
      if (timer !== null) clearTimeout(timer);
      timer = null;
      while (pending.length > 0 && db.isOpen) {
        const batch = pending.splice(0, WRITE_ROWS_MAX);
        try {
          writeBatch(db, insert, batch);
        } catch (e) {
          onError(e);
          notes.dropped?.(batch.length + pending.length);
          pending = [];
        }
      }
    },
  };
  return ledger;
}
