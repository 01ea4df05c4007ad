// tokenLimit (issue 26): per tenant, a request is admitted only while the
// tokens its tenant's finished requests used in the window are below each token
// limit, so the tokens finished in any window never exceed the limit plus those
// of the requests in flight when it was reached; a token 429 only when the
// window, widened by one bucket (the core's bucketing), holds the limit.
// Charges are the observer's own, from each requestFinished's usage.
import type { Effect, ErrorCode, TokenLimit } from "../../core/mod.ts";
import type { Model, MReq } from "../model/model.ts";
import type { Check } from "./catalog.ts";

/** Refusals the core decides before the token limits are consulted (core/events/on_request_received.ts `refusal`). */
const BEFORE_TOKENS: ReadonlySet<string> = new Set<ErrorCode>([
  "shutting_down",
  "provider_disabled",
  "model_not_found",
  "binary_body_unsupported",
]);

const CODES: ReadonlySet<string> = new Set<ErrorCode>([
  "token_rate_limited",
  "token_budget_exceeded",
]);

/** Every finished request's tokens, charged to its tenant at the time it ended. */
export function charge(
  m: Model,
  f: Extract<Effect, { kind: "requestFinished" }>,
): void {
  const tokens = (f.usage.prompt ?? 0) + (f.usage.completion ?? 0);
  if (tokens === 0) return;
  const list = m.tokenCharges.get(f.tenant) ?? [];
  list.push([m.now, tokens]);
  m.tokenCharges.set(f.tenant, list);
}

function limitsOf(m: Model, tenant: string): TokenLimit[] {
  const out: TokenLimit[] = [];
  const rate = m.c.tokenRateLimits[tenant];
  if (rate !== undefined) out.push(rate);
  if (m.c.defaultTokenBudget !== null) out.push(m.c.defaultTokenBudget);
  return out;
}

function usedSince(m: Model, tenant: string, sinceMs: number): number {
  let sum = 0;
  for (const [at, tokens] of m.tokenCharges.get(tenant) ?? []) {
    if (at > sinceMs) sum += tokens;
  }
  return sum;
}

/** `code`: how the new request ended in its arrival step (null: still open). */
export function admittedBelowTokenLimit(
  m: Model,
  check: Check,
  nr: MReq,
  code: string | null,
): void {
  if (code !== null && BEFORE_TOKENS.has(code)) return;
  const limits = limitsOf(m, nr.tenant);
  const refused = code !== null && CODES.has(code);
  if (refused) {
    check(
      limits.some((l) =>
        usedSince(
          m,
          nr.tenant,
          m.now - l.windowMs - 2 * Math.max(1, Math.floor(l.windowMs / 60)),
        ) >= l.tokens
      ),
      "tokenLimit",
      () =>
        `${nr.id} (tenant ${nr.tenant}) refused with ${code} at ${m.now} though no token window holds its limit`,
    );
    return;
  }
  for (const l of limits) {
    const used = usedSince(m, nr.tenant, m.now - l.windowMs);
    check(
      used < l.tokens,
      "tokenLimit",
      () =>
        `${nr.id} (tenant ${nr.tenant}) admitted at ${m.now} with ${used} tokens finished in the last ${l.windowMs} ms, limit ${l.tokens}`,
    );
  }
}
