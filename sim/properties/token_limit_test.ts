import assert from "node:assert/strict";
import fc from "fast-check";
import type { KeyRef } from "../../core/config.ts";
import type { Event } from "../../core/events/event.ts";
import {
  addWorker,
  newState,
  ofKind,
  requestEvent,
  step,
  tick,
} from "../../core/_testing.ts";
import type { State } from "../../core/state/state.ts";

const MIN = 60_000;
const DAY = 86_400_000;

type AskOpts = {
  tenant?: string;
  key?: KeyRef;
  atMs?: number;
  prompt?: number;
  maxTokens?: number;
};

function ask(state: State, id: string, opts: AskOpts = {}) {
  const e: Event = {
    ...requestEvent(state, id, { atMs: opts.atMs ?? state.nowMs }),
    ...(opts.tenant === undefined ? {} : { tenant: opts.tenant }),
    ...(opts.key === undefined ? {} : { key: opts.key }),
    ...(opts.prompt === undefined && opts.maxTokens === undefined ? {} : {
      tokenAsk: {
        usageAsked: false,
        promptEstimate: opts.prompt ?? 0,
        maxTokens: opts.maxTokens ?? null,
      },
    }),
  };
  return step(state, e);
}

function finishWith(
  state: State,
  id: string,
  prompt: number,
  completion: number,
  atMs = state.nowMs,
) {
  return step(state, {
    kind: "completeReceived",
    atMs,
    workerId: "w1",
    requestId: id,
    statusCode: 200,
    headers: {},
    body: "{}",
    tokenCounts: {
      prompt_tokens: prompt,
      completion_tokens: completion,
      total_tokens: prompt + completion,
    },
  });
}

/** The error request `id` was refused with as it arrived, or null: admitted. */
function refusalOf(state: State, id: string, opts: AskOpts = {}) {
  const errors = ofKind(ask(state, id, opts), "respondError");
  return errors.length === 0 ? null : errors[0]!.error;
}

Deno.test("issue 26 a tenant at its tok/min limit is refused 429 token_rate_limited with Retry-After until the window has room", () => {
  const state = newState({
    tokenRateLimits: { acme: { tokens: 100, windowMs: MIN } },
  });
  addWorker(state, "w1", { maxConcurrent: 10 });
  // Two in flight while the window is empty: both admitted.
  assert.equal(refusalOf(state, "a", { tenant: "acme", atMs: 1000 }), null);
  assert.equal(refusalOf(state, "b", { tenant: "acme", atMs: 1000 }), null);
  finishWith(state, "a", 40, 30, 2000); // 70
  assert.equal(refusalOf(state, "c", { tenant: "acme", atMs: 2000 }), null);
  finishWith(state, "b", 20, 20, 3000); // 110: over, in-flight b finished anyway
  const refused = refusalOf(state, "d", { tenant: "acme", atMs: 3000 });
  assert.equal(refused?.status, 429);
  assert.equal(refused?.code, "token_rate_limited");
  // The 2000 bucket (70) leaves the window whole at 2000 + 1000 + 60000: then 40 < 100.
  assert.equal(refused?.retryAfterSecs, 60);
  assert.equal(refused?.details?.resetInMs, 60_000);
  // Other tenants are not affected.
  assert.equal(refusalOf(state, "e", { tenant: "other", atMs: 3000 }), null);
  assert.equal(
    refusalOf(state, "f", { tenant: "acme", atMs: 62_999 })?.code,
    "token_rate_limited",
  );
  assert.equal(refusalOf(state, "g", { tenant: "acme", atMs: 63_000 }), null);
});

Deno.test("issue 26 a token budget refuses with token_budget_exceeded; a refused request charges nothing", () => {
  const state = newState({
    defaultTokenBudget: { tokens: 50, windowMs: DAY },
  });
  addWorker(state, "w1");
  ask(state, "a", { atMs: 0 });
  finishWith(state, "a", 30, 20, 10);
  const refused = refusalOf(state, "b", { atMs: 20 });
  assert.equal(refused?.code, "token_budget_exceeded");
  assert.equal(refused?.status, 429);
  // The bucket of a day window is 24 minutes wide: room when all of it is a day old.
  assert.equal(refused?.details?.resetInMs, DAY + 24 * MIN - 20);
  assert.ok(refused!.retryAfterSecs! >= DAY / 1000);
  const finished = ofKind(ask(state, "c", { atMs: 30 }), "requestFinished");
  assert.equal(finished[0]?.outcome, "rejected");
  assert.equal(state.tokenWindows.get("budget|tenant:default")?.total, 50);
});

Deno.test("issue 26 an API key's own token limit applies to its requests, beside its tenant's none", () => {
  const state = newState();
  addWorker(state, "w1");
  const key: KeyRef = {
    id: "key_1",
    name: "ci",
    rateLimit: null,
    tokenRateLimit: { tokens: 10, windowMs: 1000 },
    tokenBudget: null,
  };
  ask(state, "a", { key, atMs: 0 });
  finishWith(state, "a", 5, 5, 100);
  assert.equal(
    refusalOf(state, "b", { key, atMs: 200 })?.code,
    "token_rate_limited",
  );
  // The same tenant without the key is free.
  assert.equal(refusalOf(state, "c", { atMs: 200 }), null);
  // 100 falls in the bucket [96, 112) (16 ms wide), which leaves at 112 + 1000.
  assert.equal(
    refusalOf(state, "d", { key, atMs: 1111 })?.code,
    "token_rate_limited",
  );
  assert.equal(refusalOf(state, "e", { key, atMs: 1112 }), null);
});

Deno.test("issue 26 an API key's request limit refuses 429 rate_limit_exceeded past its count", () => {
  const state = newState();
  addWorker(state, "w1", { maxConcurrent: 10 });
  const key: KeyRef = {
    id: "key_2",
    name: "bot",
    rateLimit: { limit: 2, windowMs: MIN },
    tokenRateLimit: null,
    tokenBudget: null,
  };
  assert.equal(refusalOf(state, "a", { key, atMs: 0 }), null);
  assert.equal(refusalOf(state, "b", { key, atMs: 1 }), null);
  const r = refusalOf(state, "c", { key, atMs: 2 });
  assert.equal(r?.code, "rate_limit_exceeded");
  assert.equal(r?.retryAfterSecs, 60);
});

Deno.test("issue 26 token windows are pruned on tick once empty", () => {
  const state = newState({
    tokenRateLimits: { acme: { tokens: 100, windowMs: 1000 } },
  });
  addWorker(state, "w1");
  ask(state, "a", { tenant: "acme", atMs: 0 });
  finishWith(state, "a", 1, 1, 10);
  assert.equal(state.tokenWindows.size, 1);
  tick(state, 500);
  assert.equal(state.tokenWindows.size, 1);
  tick(state, 2000);
  assert.equal(state.tokenWindows.size, 0);
});

Deno.test("issue 33 concurrent requests reserve prompt plus max_tokens at admission: a 100-token budget admits what fits, and the ends settle it", () => {
  const state = newState({
    tokenBudgets: { acme: { tokens: 100, windowMs: DAY } },
  });
  addWorker(state, "w1", { maxConcurrent: 100 });
  const admitted: string[] = [];
  for (let i = 0; i < 40; i++) {
    const id = `r${i}`;
    const r = refusalOf(state, id, {
      tenant: "acme",
      prompt: 5,
      maxTokens: 20,
    });
    if (r === null) admitted.push(id);
    else assert.equal(r.code, "token_budget_exceeded");
  }
  // 4 x 25 = 100 reserved: the 5th does not fit.
  assert.deepEqual(admitted, ["r0", "r1", "r2", "r3"]);
  const refused = refusalOf(state, "late", {
    tenant: "acme",
    prompt: 5,
    maxTokens: 20,
  });
  // Only reservations fill the window: retry after the configured Retry-After.
  assert.equal(refused?.retryAfterSecs, state.config.retryAfterSecs);
  // Each ends using less than it reserved: the difference is free again.
  finishWith(state, "r0", 5, 5); // 10 charged, 75 reserved
  assert.equal(
    refusalOf(state, "r40", { tenant: "acme", prompt: 5, maxTokens: 10 }),
    null,
  );
  for (const id of ["r1", "r2", "r3", "r40"]) finishWith(state, id, 5, 5);
  const w = state.tokenWindows.get("budget|tenant:acme")!;
  assert.equal(w.reserved, 0);
  assert.equal(w.total, 50);
});

Deno.test("issue 33 a request larger than the budget still runs alone, never beside another reservation", () => {
  const state = newState({
    tokenBudgets: { acme: { tokens: 100, windowMs: DAY } },
  });
  addWorker(state, "w1", { maxConcurrent: 10 });
  assert.equal(
    refusalOf(state, "big", { tenant: "acme", maxTokens: 500 }),
    null,
  );
  assert.equal(
    refusalOf(state, "small", { tenant: "acme", maxTokens: 1 })?.code,
    "token_budget_exceeded",
  );
  finishWith(state, "big", 10, 50);
  assert.equal(
    refusalOf(state, "next", { tenant: "acme", maxTokens: 500 }),
    null,
  );
});

Deno.test("issue 33 a refused or queue-full request reserves nothing, and a reserved window is not pruned while in flight", () => {
  const state = newState({
    tokenBudgets: { acme: { tokens: 100, windowMs: DAY } },
    queueLenMax: 0,
  });
  // No worker for the model: the request would queue, and the queue is full.
  addWorker(state, "w1", { maxConcurrent: 1 });
  assert.equal(refusalOf(state, "a", { tenant: "acme", maxTokens: 30 }), null);
  assert.equal(
    refusalOf(state, "b", { tenant: "acme", maxTokens: 30 })?.code,
    "queue_full",
  );
  const w = state.tokenWindows.get("budget|tenant:acme")!;
  assert.equal(w.reserved, 30);
  tick(state, state.nowMs + 1000);
  assert.equal(state.tokenWindows.get("budget|tenant:acme")?.reserved, 30);
  finishWith(state, "a", 0, 0);
  assert.equal(w.reserved, 0);
  tick(state, state.nowMs + 2000);
  assert.equal(state.tokenWindows.has("budget|tenant:acme"), false);
});

Deno.test("issue 33 property: with every request using at most its reservation, a budget never holds more than its limit while two or more are in flight, and ends at most one reservation above it", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 10, max: 200 }),
      fc.array(
        fc.oneof(
          fc.record({
            kind: fc.constant("arrive" as const),
            prompt: fc.integer({ min: 0, max: 40 }),
            maxTokens: fc.integer({ min: 0, max: 120 }),
          }),
          fc.record({
            kind: fc.constant("finish" as const),
            pick: fc.nat(),
            share: fc.double({ min: 0, max: 1, noNaN: true }),
          }),
        ),
        { maxLength: 60 },
      ),
      (limit, ops) => {
        const state = newState({
          tokenBudgets: { acme: { tokens: limit, windowMs: DAY } },
        });
        addWorker(state, "w1", { maxConcurrent: 1000 });
        const inFlight: Array<{ id: string; reserve: number }> = [];
        let largest = 0;
        ops.forEach((op, n) => {
          if (op.kind === "arrive") {
            const id = `r${n}`;
            const r = refusalOf(state, id, {
              tenant: "acme",
              prompt: op.prompt,
              maxTokens: op.maxTokens,
            });
            if (r === null) {
              const reserve = op.prompt + op.maxTokens;
              inFlight.push({ id, reserve });
              largest = Math.max(largest, reserve);
            }
          } else if (inFlight.length > 0) {
            const [done] = inFlight.splice(op.pick % inFlight.length, 1);
            const used = Math.floor(done!.reserve * op.share);
            finishWith(state, done!.id, 0, used);
          }
          const w = state.tokenWindows.get("budget|tenant:acme");
          const held = (w?.total ?? 0) + (w?.reserved ?? 0);
          if (inFlight.length >= 2) {
            assert.ok(held <= limit, `${held} > ${limit}`);
          }
          assert.ok(
            (w?.total ?? 0) <= Math.max(limit, limit - 1 + largest),
            `charged ${w?.total} with limit ${limit}`,
          );
        });
      },
    ),
    { seed: 33, numRuns: 300 },
  );
});
