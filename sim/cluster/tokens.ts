// fleetTokenLimit (issue 26): over the whole fleet, the tokens of the requests
// of the token-limited tenant that reached a worker never exceed the limit plus
// the tokens of the requests in flight when it was reached. "Reached" is read
// from the log as a fleet sees it: the entries in the order replicas apply them
// (the first replica to read an entry stands for all), a request's tokens
// (the worker's counts) charged when that replica's core completes it, as the
// core charges them. In flight then: every request of the tenant whose arrival
// was in the log and that had not completed yet (lenient: a request refused or
// gone still counts, so only an admission after the limit was reached can
// break it).
//
// Per log history, like fleetRateLimit: a wiped log forgets its windows, and
// so does a failover that lost the log's tail. The whole run fits in one
// window (arrivals stop at 20 s, the window is a minute), so the first time
// the limit is reached is the one that matters.
import type { ClusterRecord } from "../../core/cluster/record.ts";

/** The tenant with a token rate limit, and its limit per minute. */
export const TOKEN_TENANT = "a";
export const TOKEN_LIMIT = 200;

/** The tokens (prompt + completion) request `n` uses: fixed per request, no draw. */
export function tokensOfRequest(
  n: number,
): { prompt: number; completion: number } {
  return { prompt: 10 + (n * 7) % 17, completion: 12 + (n * 11) % 23 };
}

type History = {
  /** Entries this history has seen read (by any replica). */
  read: Set<string>;
  completed: Set<string>;
  charged: number;
  /** The requests in flight when the limit was reached; null: not reached. */
  inFlightAtReach: Set<string> | null;
  /** The tenant's requests that reached a worker in this history. */
  dispatched: Set<string>;
};

export type TokenLedger = {
  /** Requests of the tenant whose arrival was in the log (any history). */
  received: Set<string>;
  histories: Map<number, History>;
};

export function newTokenLedger(): TokenLedger {
  return { received: new Set(), histories: new Map() };
}

function historyOf(l: TokenLedger, h: number): History {
  let x = l.histories.get(h);
  if (x === undefined) {
    x = {
      read: new Set(),
      completed: new Set(),
      charged: 0,
      inFlightAtReach: null,
      dispatched: new Set(),
    };
    l.histories.set(h, x);
  }
  return x;
}

/** A request of the tenant is sent to a worker in history `h`. */
export function tokenDispatched(
  l: TokenLedger,
  h: number,
  requestId: string,
): void {
  historyOf(l, h).dispatched.add(requestId);
}

/**
 * A replica reads `entry` in history `h`: its arrivals count on the first read.
 * Returns whether this is the first read (its charges then count too).
 */
export function tokenEntryRead(
  l: TokenLedger,
  h: number,
  entryId: string,
  /** Null when the run has no token limit: its arrivals are not needed. */
  decode: (() => ClusterRecord) | null,
): boolean {
  const x = historyOf(l, h);
  if (x.read.has(entryId)) return false;
  x.read.add(entryId);
  const record = decode?.();
  if (record?.kind !== "events") return true;
  for (const e of record.events) {
    if (e.kind === "requestReceived" && e.tenant === TOKEN_TENANT) {
      l.received.add(e.requestId);
    }
  }
  return true;
}

/**
 * The first replica to apply an entry completed a request of the tenant: the
 * core charges its tokens (the worker's counts, whatever the replica kept).
 */
export function tokenCharged(
  l: TokenLedger,
  h: number,
  requestId: string,
  tokens: number,
): void {
  const x = historyOf(l, h);
  if (x.completed.has(requestId)) return;
  if (x.inFlightAtReach === null && x.charged + tokens >= TOKEN_LIMIT) {
    // In flight just before this completion, itself included.
    x.inFlightAtReach = new Set(
      [...l.received].filter((id) => !x.completed.has(id)),
    );
  }
  x.completed.add(requestId);
  x.charged += tokens;
}

/** The violations, one line each: a history that admitted past the limit. */
export function fleetTokenLimitBroken(
  l: TokenLedger,
  tokensOfId: (id: string) => number,
): string[] {
  const out: string[] = [];
  for (const [h, x] of l.histories) {
    if (x.inFlightAtReach === null) continue;
    const sum = (ids: Iterable<string>) => {
      let n = 0;
      for (const id of ids) n += tokensOfId(id);
      return n;
    };
    const admitted = sum(x.dispatched);
    const inFlight = sum(x.inFlightAtReach);
    if (admitted >= TOKEN_LIMIT + inFlight) {
      out.push(
        `${admitted} tokens of tenant ${TOKEN_TENANT} reached workers in log history ${h}, limit ${TOKEN_LIMIT}/min + ${inFlight} in flight when reached (${x.inFlightAtReach.size} requests)`,
      );
    }
  }
  return out;
}
