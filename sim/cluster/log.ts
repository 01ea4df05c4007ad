// The cluster simulator's shared log (issue 23): a Redis Stream in miniature.
// Entry ids are `ms-seq` as Redis makes them (ms never goes back, seq counts
// within one ms), reads return what follows an id, a snapshot key sits beside
// the stream, trims drop what precedes an id, and faults stall it, wipe it
// (new epoch) or lose its tail (a failover to a lagging replica).
import {
  compareIds,
  type LogEntry,
  type Snapshot,
} from "../../core/cluster/instance.ts";

export type VirtualLog = {
  epoch: number;
  entries: LogEntry[];
  lastMs: number;
  lastSeq: number;
  snapshot: Snapshot | null;
  /** The snapshot before it: what a replica that missed the latest still has. */
  previousSnapshot: Snapshot | null;
  /** Reads and appends wait until then (a stall, or an engine coming back). */
  stalledUntil: number;
  /** Appends that arrived while stalled, in arrival order (one FIFO, as a connection is). */
  waiting: string[];
  drainQueued: boolean;
  /** Every entry appended, in order (ids and data): the run's fingerprint. */
  hash: number;
};

export function newLog(): VirtualLog {
  return {
    epoch: 0,
    entries: [],
    lastMs: 0,
    lastSeq: -1,
    snapshot: null,
    previousSnapshot: null,
    stalledUntil: 0,
    waiting: [],
    drainQueued: false,
    hash: 0x811c9dc5,
  };
}

/** FNV-1a (32-bit) over the UTF-16 code units of `text`, from `h`. */
function fold(h: number, text: string): number {
  for (let i = 0; i < text.length; i++) {
    h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  }
  return Math.imul(h ^ 10, 0x01000193);
}

export function epochName(log: VirtualLog): string {
  return `e${log.epoch}`;
}

export function appendEntry(
  log: VirtualLog,
  data: string,
  now: number,
): LogEntry {
  const ms = Math.max(now, log.lastMs);
  const seq = ms === log.lastMs ? log.lastSeq + 1 : 0;
  log.lastMs = ms;
  log.lastSeq = seq;
  const entry = { id: `${ms}-${seq}`, ms, data };
  log.entries.push(entry);
  log.hash = fold(fold(log.hash, entry.id), data);
  return entry;
}

/** The index of the first entry after `afterId` (binary search: ids ascend). */
function firstAfter(log: VirtualLog, afterId: string): number {
  // Most reads are a tail's poll that finds nothing new.
  const last = log.entries.at(-1);
  if (
    last === undefined || last.id === afterId ||
    compareIds(last.id, afterId) <= 0
  ) {
    return log.entries.length;
  }
  let lo = 0;
  let hi = log.entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (compareIds(log.entries[mid]!.id, afterId) > 0) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

export function readAfter(
  log: VirtualLog,
  afterId: string,
  count: number,
): LogEntry[] {
  const from = firstAfter(log, afterId);
  return log.entries.slice(from, from + count);
}

/** XTRIM MINID: drops the entries before `id`. */
export function trimBefore(log: VirtualLog, id: string): void {
  let n = 0;
  while (
    n < log.entries.length && compareIds(log.entries[n]!.id, id) < 0
  ) n++;
  if (n > 0) log.entries.splice(0, n);
}

/** The engine restarts empty: a new epoch, no entries, no snapshot. */
export function wipe(log: VirtualLog): void {
  log.epoch++;
  log.entries = [];
  log.lastMs = 0;
  log.lastSeq = -1;
  log.snapshot = null;
  log.previousSnapshot = null;
  log.waiting = [];
}

/** SET of the snapshot key. */
export function putSnapshot(log: VirtualLog, snapshot: Snapshot): void {
  log.previousSnapshot = log.snapshot;
  log.snapshot = snapshot;
}

/**
 * A failover to a replica that missed the last `k` entries: the stream (and
 * the snapshot key, if it was written after them) is as the replica had it;
 * new ids continue from the replica's last one.
 */
export function loseTail(log: VirtualLog, k: number): void {
  const kept = Math.max(0, log.entries.length - k);
  const lost = log.entries.splice(kept);
  const last = log.entries.at(-1);
  // The snapshot key replicates in order with the stream: one written after
  // the lost entries is lost too.
  const first = lost[0];
  const survives = (s: Snapshot | null) =>
    s !== null && (first === undefined || compareIds(s.id, first.id) < 0);
  if (!survives(log.snapshot)) {
    log.snapshot = survives(log.previousSnapshot) ? log.previousSnapshot : null;
  }
  log.lastMs = last?.ms ?? 0;
  log.lastSeq = last === undefined ? -1 : Number(last.id.split("-")[1]);
  log.waiting = [];
}
