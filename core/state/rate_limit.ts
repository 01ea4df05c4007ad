// Per-tenant rate limits (spec 004) as a sliding window over event times: the
// admission times of the last window are kept (at most `limit` of them, since
// the rest are refused), so the count is exact, never under-counted, and the
// wait until the next free slot is known.
import type { RateLimit } from "../config.ts";
import type { State } from "./state.ts";

export type RateVerdict =
  | { ok: true }
  | { ok: false; limit: RateLimit; retryAfterMs: number };

export function limitFor(state: State, tenant: string): RateLimit | null {
  return state.config.rateLimits[tenant] ?? state.config.defaultRateLimit;
}

function recent(
  state: State,
  tenant: string,
  windowMs: number,
  windows: Map<string, number[]> = state.rateWindows,
): number[] {
  const since = state.nowMs - windowMs;
  const times = windows.get(tenant) ?? [];
  let drop = 0;
  while (drop < times.length && times[drop]! <= since) drop++;
  if (drop > 0) times.splice(0, drop);
  return times;
}

/** Counts the request against its tenant's window, or refuses it without counting. */
export function admitRate(state: State, tenant: string): RateVerdict {
  const limit = limitFor(state, tenant);
  if (limit === null) return { ok: true };
  return admitRateOf(state, state.rateWindows, tenant, limit);
}

/** admitRate over any subject's windows (an API key's own limit, issue 26). */
export function admitRateOf(
  state: State,
  windows: Map<string, number[]>,
  subject: string,
  limit: RateLimit,
): RateVerdict {
  const times = recent(state, subject, limit.windowMs, windows);
  if (times.length >= limit.limit) {
    return {
      ok: false,
      limit,
      retryAfterMs: times[0]! + limit.windowMs - state.nowMs,
    };
  }
  times.push(state.nowMs);
  windows.set(subject, times);
  return { ok: true };
}

/** Drops expired entries and empty tenants (called on tick, so memory stays bounded). */
export function pruneRateWindows(state: State): void {
  for (const tenant of [...state.rateWindows.keys()]) {
    const limit = limitFor(state, tenant);
    const times = limit === null ? [] : recent(state, tenant, limit.windowMs);
    if (times.length === 0) state.rateWindows.delete(tenant);
  }
  // Key windows (issue 26) are dropped once their newest admission is older
  // than any limit a key may have (a day), since the core keeps no key table.
  for (const [id, times] of state.keyRateWindows) {
    const newest = times[times.length - 1];
    if (newest === undefined || newest <= state.nowMs - 86_400_000) {
      state.keyRateWindows.delete(id);
    }
  }
}
