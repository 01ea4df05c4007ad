// Failed authentications per client address (issue 15), kept for a window and
// capped: the rule behind the worker door's throttle, and since issue 33 behind
// the operator doors' (admin API, /metrics) too, so one rule holds for all.
import type { Config } from "../config.ts";

/** Times of failures, per address (or per door and address). */
export type AuthFailures = Map<string, number[]>;

type Limits = Pick<Config, "authFailuresMax" | "authFailureWindowMs">;

/** The failures of `key` still inside the window; older ones are forgotten. */
export function recentFailures(
  failures: AuthFailures,
  key: string,
  nowMs: number,
  windowMs: number,
): number[] {
  const since = nowMs - windowMs;
  const times = (failures.get(key) ?? []).filter((t) => t > since);
  if (times.length === 0) failures.delete(key);
  else failures.set(key, times);
  return times;
}

/**
 * Seconds until `key` may try again once it has used up its failures, else
 * null: the oldest failure still counted must leave the window first.
 */
export function throttledForSecs(
  failures: AuthFailures,
  key: string,
  nowMs: number,
  limits: Limits,
): number | null {
  const times = recentFailures(
    failures,
    key,
    nowMs,
    limits.authFailureWindowMs,
  );
  if (times.length < limits.authFailuresMax) return null;
  const freeAtMs = times[times.length - limits.authFailuresMax]! +
    limits.authFailureWindowMs;
  return Math.max(1, Math.ceil((freeAtMs - nowMs) / 1000));
}
