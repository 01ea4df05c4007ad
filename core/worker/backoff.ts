// Reconnect pacing of the worker (spec: 1 s to 30 s plus up to 500 ms jitter). Pure:
// the random draw is passed in.
export const BACKOFF_MIN_MS = 1_000;
export const BACKOFF_MAX_MS = 30_000;
export const JITTER_MAX_MS = 500;
/** A rejected secret will not fix itself quickly: retry at the slowest pace. */
export const AUTH_RETRY_MS = BACKOFF_MAX_MS;
/** After the proxy's own graceful_shutdown, a replacement usually needs a moment. */
export const SERVER_RESTART_RETRY_MS = 2_000;

/** 1 s doubling to 30 s, plus up to 500 ms of jitter; `random01` is in [0, 1). */
export function backoffMs(failedAttempts: number, random01: number): number {
  const base = Math.min(
    BACKOFF_MAX_MS,
    BACKOFF_MIN_MS * 2 ** Math.min(failedAttempts, 16),
  );
  return base + jitterMs(random01);
}

export function jitterMs(random01: number): number {
  return Math.floor(Math.min(Math.max(random01, 0), 0.999_999) * JITTER_MAX_MS);
}

/**
 * The most a worker waits before retrying after the proxy closed with 1012
 * (service restart) or 1013 (try again later): the proxy says its condition is
 * short (a relay instance rejoining its cluster log, issue 23), so the pace
 * does not grow to BACKOFF_MAX_MS and the worker is back within seconds of
 * the proxy being able to take it.
 */
export const RETRY_SOON_MAX_MS = 4_000;

/** Close codes by which the proxy asks to be retried soon. */
export function asksRetrySoon(code: number): boolean {
  return code === 1012 || code === 1013;
}
