// streamsCounted (issue 33), single-node side: a stream that finished normally
// is counted. Its usage record carries at least one token per chunk its client
// received (the virtual backend reports one completion token per chunk), and
// right after the step that ended it, every token window of its tenant holds
// at least those tokens (the charge reached every limit that applies).
import type { Effect, State, TokenUsage } from "../../core/mod.ts";
import type { Ended, Model } from "../model/model.ts";
import type { Check } from "./catalog.ts";

function tokensOf(u: TokenUsage): number {
  return (u.prompt ?? 0) + (u.completion ?? 0);
}

/** At requestFinished: a completed stream's record counts its chunks. */
export function finishedStreamCounted(
  m: Model,
  check: Check,
  f: Extract<Effect, { kind: "requestFinished" }>,
  ended: Ended | undefined,
): void {
  if (
    ended === undefined || !ended.streaming || ended.chunks === 0 ||
    f.outcome !== "completed" || f.status >= 400
  ) return;
  const tokens = tokensOf(f.usage);
  check(
    tokens >= ended.chunks,
    "streamsCounted",
    () =>
      `${f.requestId} streamed ${ended.chunks} chunks and completed, but its usage counts ${tokens} tokens`,
  );
  m.streamsCountedNow.push({ id: f.requestId, tenant: f.tenant, tokens });
}

/** After the step: each of those tokens reached every token window of the tenant. */
export function chargedToEveryLimit(
  m: Model,
  check: Check,
  state: State,
): void {
  for (const s of m.streamsCountedNow) {
    const kinds: string[] = [];
    if (m.c.tokenRateLimits[s.tenant] !== undefined) kinds.push("rate");
    if (m.c.defaultTokenBudget !== null) kinds.push("budget");
    for (const kind of kinds) {
      const total =
        state.tokenWindows.get(`${kind}|tenant:${s.tenant}`)?.total ??
          0;
      check(
        total >= s.tokens,
        "streamsCounted",
        () =>
          `${s.id} (tenant ${s.tenant}) finished with ${s.tokens} tokens, but its ${kind} window holds ${total}`,
      );
    }
  }
}
