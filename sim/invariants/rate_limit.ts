// rateLimit (spec 004): per tenant, admissions in any sliding window never
// exceed the limit; 429 only when the window is full (never under- or
// over-counted). Checked at arrival against the window as the observer counts it.
import type { ErrorCode } from "../../core/mod.ts";
import type { Model, MReq } from "../model/model.ts";
import type { Check } from "./catalog.ts";

/** Refusals the core decides before the rate limit is consulted (not counted). */
const BEFORE_RATE: ReadonlySet<string> = new Set<ErrorCode>([
  "shutting_down",
  "provider_disabled",
  "model_not_found",
  "binary_body_unsupported",
  // Issue 26: token limits are consulted first and count nothing.
  "token_rate_limited",
  "token_budget_exceeded",
]);

/** `code`: how the new request ended in its arrival step (null: still open). */
export function admittedWithinLimit(
  m: Model,
  check: Check,
  nr: MReq,
  code: string | null,
): void {
  if (code !== null && BEFORE_RATE.has(code)) return;
  const limit = m.c.rateLimits[nr.tenant] ?? m.c.defaultRateLimit;
  const refused = code === "rate_limit_exceeded";
  if (limit === null) {
    check(
      !refused,
      "rateLimit",
      () => `${nr.id} (tenant ${nr.tenant}) refused with 429 without a limit`,
    );
    if (!refused) m.sched.admitted++;
    return;
  }
  const since = m.now - limit.windowMs;
  const times = (m.windows.get(nr.tenant) ?? []).filter((t) => t > since);
  if (refused) {
    m.sched.rateLimited++;
    check(
      times.length >= limit.limit,
      "rateLimit",
      () =>
        `${nr.id} (tenant ${nr.tenant}) refused with 429 at ${m.now} with only ${times.length} of ${limit.limit} admissions in the last ${limit.windowMs} ms`,
    );
  } else {
    m.sched.admitted++;
    check(
      times.length < limit.limit,
      "rateLimit",
      () =>
        `${nr.id} (tenant ${nr.tenant}) admitted at ${m.now} with ${times.length} of ${limit.limit} already in the last ${limit.windowMs} ms (admitted at ${
          times.join(",")
        })`,
    );
    times.push(m.now);
  }
  m.windows.set(nr.tenant, times);
}
