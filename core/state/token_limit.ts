// Token rate limits and budgets (issue 26), per tenant and per API key. A
// request's tokens (prompt plus completion) are charged when it finishes, to
// the window of every limit that applies to it; a new request is refused while
// any of those windows holds as many tokens as its limit.
//
// Issue 33: what a request may use is reserved at admission (its prompt
// estimate plus its max_tokens) and the reservation released when it is
// charged, so concurrent requests cannot all pass a window that has room for
// one. A request is admitted when its reservation fits in what the window has
// left, or, so that a request larger than the limit can still run, when nothing
// else holds a reservation there and the window is under its limit.
//
// Windows slide. Each keeps at most 60 buckets of `windowMs / 60` (a second for
// tok/min, 24 minutes for tok/day): memory stays bounded whatever the traffic,
// and a bucket leaves the window only once all of it is older than the window,
// so the count errs on the side of the limit (never under-counted).
import type { TokenLimit } from "../config.ts";
import type { KeyRef, Request, State, TokenWindow } from "./state.ts";

export type TokenLimitKind = "rate" | "budget";

export type TokenVerdict =
  | { ok: true }
  | {
    ok: false;
    code: "token_rate_limited" | "token_budget_exceeded";
    /** "tenant acme" or "API key key_…", for the message. */
    who: string;
    limit: TokenLimit;
    used: number;
    retryAfterMs: number;
  };

/** One limit that applies to a request: where its window lives and what it allows. */
type Applied = {
  windowKey: string;
  kind: TokenLimitKind;
  who: string;
  limit: TokenLimit;
};

const BUCKETS = 60;

/** What `applied` answers when no limit applies: shared, never written. */
const NONE_APPLIED: readonly Applied[] = [];

function applied(
  state: State,
  tenant: string,
  key: KeyRef | null,
): readonly Applied[] {
  const c = state.config;
  // Issue 31: most relays set no token limit; their requests then build no
  // closure, array or window key here (admitted, reserved and settled each ask).
  if (
    key?.tokenBudget == null && key?.tokenRateLimit == null &&
    c.defaultTokenBudget === null && c.defaultTokenRateLimit === null &&
    c.tokenBudgets[tenant] == null && c.tokenRateLimits[tenant] == null
  ) return NONE_APPLIED;
  const out: Applied[] = [];
  /** The tenant's limit of this kind, then the key's. */
  const add = (
    kind: TokenLimitKind,
    tenantLimit: TokenLimit | null,
    keyLimit: TokenLimit | null,
  ) => {
    if (tenantLimit !== null) {
      const windowKey = `${kind}|tenant:${tenant}`;
      out.push({
        windowKey,
        kind,
        who: `tenant ${tenant}`,
        limit: tenantLimit,
      });
    }
    if (key !== null && keyLimit !== null) {
      const windowKey = `${kind}|key:${key.id}`;
      out.push({ windowKey, kind, who: `API key ${key.id}`, limit: keyLimit });
    }
  };
  // Budgets first: when both are reached, the longer wait is the one to tell.
  add(
    "budget",
    c.tokenBudgets[tenant] ?? c.defaultTokenBudget,
    key?.tokenBudget ?? null,
  );
  add(
    "rate",
    c.tokenRateLimits[tenant] ?? c.defaultTokenRateLimit,
    key?.tokenRateLimit ?? null,
  );
  return out;
}

/** Drops the buckets wholly older than the window. */
function expire(w: TokenWindow, nowMs: number): void {
  let drop = 0;
  while (
    drop < w.buckets.length &&
    w.buckets[drop]!.atMs + w.bucketMs + w.limit.windowMs <= nowMs
  ) {
    w.total -= w.buckets[drop]!.tokens;
    drop++;
  }
  if (drop > 0) w.buckets.splice(0, drop);
}

/**
 * When the window will have room again: the configured Retry-After when only
 * reservations fill it (they end with their requests), else when enough of its
 * charged tokens expire.
 */
function retryAfterMs(state: State, w: TokenWindow): number {
  const nowMs = state.nowMs;
  if (w.total < w.limit.tokens) return state.config.retryAfterSecs * 1000;
  let total = w.total;
  for (const b of w.buckets) {
    total -= b.tokens;
    if (total < w.limit.tokens) {
      return b.atMs + w.bucketMs + w.limit.windowMs - nowMs;
    }
  }
  return w.limit.windowMs; // not reached: total >= limit implies a bucket
}

/**
 * Whether a new request of `tenant` (made with `key`) that would reserve
 * `reserve` tokens may be admitted now; counts nothing.
 */
export function admitTokens(
  state: State,
  tenant: string,
  key: KeyRef | null,
  reserve = 0,
): TokenVerdict {
  for (const a of applied(state, tenant, key)) {
    const w = state.tokenWindows.get(a.windowKey);
    if (w === undefined) continue;
    expire(w, state.nowMs);
    const used = w.total + w.reserved;
    if (
      used >= a.limit.tokens ||
      (w.reserved > 0 && used + reserve > a.limit.tokens)
    ) {
      return {
        ok: false,
        code: a.kind === "rate"
          ? "token_rate_limited"
          : "token_budget_exceeded",
        who: a.who,
        limit: a.limit,
        used,
        retryAfterMs: retryAfterMs(state, w),
      };
    }
  }
  return { ok: true };
}

/** The window of limit `a`, made (or remade for a changed limit) as needed. */
function windowFor(state: State, a: Applied): TokenWindow {
  const w = state.tokenWindows.get(a.windowKey);
  if (
    w !== undefined && w.limit.windowMs === a.limit.windowMs &&
    w.limit.tokens === a.limit.tokens
  ) return w;
  // A key re-read with another limit starts a window of that limit's shape,
  // keeping what its requests in flight reserved.
  const bucketMs = Math.max(1, Math.floor(a.limit.windowMs / BUCKETS));
  const made: TokenWindow = {
    limit: a.limit,
    bucketMs,
    buckets: [],
    total: 0,
    reserved: w?.reserved ?? 0,
  };
  state.tokenWindows.set(a.windowKey, made);
  return made;
}

/** Holds an admitted request's expected tokens on every window that applies to it. */
export function reserveTokens(
  state: State,
  request: Request,
  tokens: number,
): void {
  if (tokens <= 0) return;
  for (const a of applied(state, request.tenant, request.key)) {
    windowFor(state, a).reserved += tokens;
  }
  request.tokensReserved = tokens;
}

/**
 * A finished request: its reservation released (from every window it may
 * have been made on, whatever the limits are now) and its tokens charged.
 */
export function settleTokens(
  state: State,
  request: Request,
  tokens: number,
): void {
  // Issue 31: no window at all (no token limit set) holds no reservation.
  if (request.tokensReserved > 0 && state.tokenWindows.size > 0) {
    const subjects = [`tenant:${request.tenant}`];
    if (request.key !== null) subjects.push(`key:${request.key.id}`);
    for (const kind of ["budget", "rate"]) {
      for (const subject of subjects) {
        const w = state.tokenWindows.get(`${kind}|${subject}`);
        if (w !== undefined) {
          w.reserved = Math.max(0, w.reserved - request.tokensReserved);
        }
      }
    }
  }
  request.tokensReserved = 0;
  chargeTokens(state, request, tokens);
}

/** Charges a finished request's tokens to every window that applies to it. */
export function chargeTokens(
  state: State,
  request: Request,
  tokens: number,
): void {
  if (tokens <= 0) return;
  for (const a of applied(state, request.tenant, request.key)) {
    const w = windowFor(state, a);
    const atMs = Math.floor(state.nowMs / w.bucketMs) * w.bucketMs;
    const last = w.buckets[w.buckets.length - 1];
    if (last !== undefined && last.atMs === atMs) last.tokens += tokens;
    else w.buckets.push({ atMs, tokens });
    w.total += tokens;
  }
}

/** Drops expired buckets and empty windows (on tick, so memory stays bounded). */
export function pruneTokenWindows(state: State): void {
  for (const [key, w] of state.tokenWindows) {
    expire(w, state.nowMs);
    if (w.buckets.length === 0 && w.reserved === 0) {
      state.tokenWindows.delete(key);
    }
  }
}
