// Issue 33: the worker door's per-address failure throttle (issue 15, the rule
// in core/state/auth_failures.ts and the same AUTH limits of the core's
// settings), applied to the operator doors: the admin API and /metrics. Unlike
// the worker door, an address past its failures is refused before its token is
// compared, right or wrong: otherwise a guesser would simply ignore the 429s
// and go on at full speed. The price, a minute's lock-out of an operator who
// shares an address with the guesser, is what the throttle is for; set
// TRUSTED_PROXIES so clients behind a proxy are told apart.
import type { HttpRequest, HttpResponse } from "../door/exchange.ts";
import {
  type AuthFailures,
  type Config,
  throttledForSecs,
} from "../../../core/mod.ts";
import { clientAddress, type TrustedProxies } from "../http/client_address.ts";
import { replyError } from "../http/http_reply.ts";
import { apiError } from "../../../core/mod.ts";

/** The operator doors, each throttled on its own. */
export type OperatorDoor = "admin" | "metrics";

export type AuthThrottle = {
  /** Seconds the caller must wait before its next attempt, or null: it may try. */
  refusedForSecs(door: OperatorDoor, req: HttpRequest): number | null;
  /** A wrong token from the caller. */
  failed(door: OperatorDoor, req: HttpRequest): void;
};

/** Addresses remembered at most: a flood from many addresses cannot grow memory. */
export const THROTTLED_ADDRESSES_MAX = 10_000;

export function makeAuthThrottle(
  limits: Pick<Config, "authFailuresMax" | "authFailureWindowMs">,
  trustedProxies: TrustedProxies,
  now: () => number,
): AuthThrottle {
  const failures: AuthFailures = new Map();
  const keyOf = (door: OperatorDoor, req: HttpRequest) =>
    `${door} ${clientAddress(req, trustedProxies)}`;
  const forgetOld = (nowMs: number) => {
    for (const key of [...failures.keys()]) {
      throttledForSecs(failures, key, nowMs, limits);
    }
    // Still full: the longest-known addresses go first.
    for (const key of failures.keys()) {
      if (failures.size < THROTTLED_ADDRESSES_MAX) break;
      failures.delete(key);
    }
  };
  return {
    refusedForSecs: (door, req) =>
      throttledForSecs(failures, keyOf(door, req), now(), limits),
    failed(door, req) {
      const nowMs = now();
      if (failures.size >= THROTTLED_ADDRESSES_MAX) forgetOld(nowMs);
      const key = keyOf(door, req);
      failures.set(key, [...(failures.get(key) ?? []), nowMs]);
    },
  };
}

/** 429 in the operator routes' error shape, with Retry-After. */
export function sendThrottled(res: HttpResponse, secs: number): void {
  replyError(
    res,
    apiError("too_many_auth_failures", { retryAfterSecs: secs }),
  );
}
