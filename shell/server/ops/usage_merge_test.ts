import assert from "node:assert/strict";
import fc from "fast-check";
import {
  mergeRequests,
  mergeUsage,
  newestFirst,
  parseTimeCursor,
  timeCursorOf,
  type UsagePart,
} from "./usage_merge.ts";
import type { UsageGroup, UsageRecord, UsageTotals } from "./usage_ledger.ts";

function totals(requests: number, prompt: number): UsageTotals {
  return {
    requests,
    errors: requests > 2 ? 1 : 0,
    prompt_tokens: prompt,
    completion_tokens: 2 * prompt,
    cached_tokens: 0,
    estimated_requests: 0,
  };
}

const group = (
  name: string | null,
  t: UsageTotals,
  extra: Record<string, string | null> = {},
): UsageGroup => ({ tenant: name, ...extra, ...t });

Deno.test("mergeUsage adds the totals and each group across instances, in the ledger's order", () => {
  const a: UsagePart = {
    totals: totals(5, 50),
    groups: [group("acme", totals(3, 30)), group("beta", totals(2, 20))],
  };
  const b: UsagePart = {
    totals: totals(4, 40),
    groups: [group("beta", totals(2, 25)), group("zeta", totals(2, 15))],
  };
  const merged = mergeUsage("tenant", [a, b]);
  assert.deepEqual(merged.totals, {
    requests: 9,
    errors: 2,
    prompt_tokens: 90,
    completion_tokens: 180,
    cached_tokens: 0,
    estimated_requests: 0,
  });
  assert.deepEqual(
    merged.groups.map((g) => [g.tenant, g.requests, g.prompt_tokens]),
    [["beta", 4, 45], ["acme", 3, 30], ["zeta", 2, 15]],
  );
  // Nothing from nobody: zeros, no groups.
  assert.deepEqual(mergeUsage("tenant", []), {
    totals: totals(0, 0),
    groups: [],
  });
});

Deno.test("mergeUsage keeps the null group (no key, no worker) first among equals and a key's name", () => {
  const t = totals(1, 1);
  const merged = mergeUsage("key", [
    {
      totals: totals(2, 2),
      groups: [
        { key: "k1", key_name: "old", ...t },
        { key: null, key_name: null, ...t },
      ],
    },
    { totals: t, groups: [{ key: "k1", key_name: "team", ...t }] },
  ]);
  assert.deepEqual(
    merged.groups.map((g) => [g.key, g.key_name, g.requests]),
    [["k1", "team", 2], [null, null, 1]],
  );
  const tie = mergeUsage("key", [{
    totals: totals(2, 2),
    groups: [{ key: "k2", key_name: "x", ...t }, {
      key: null,
      key_name: null,
      ...t,
    }],
  }]);
  assert.deepEqual(tie.groups.map((g) => g.key), [null, "k2"]);
});

function rec(atMs: number, requestId: string): UsageRecord {
  return {
    id: 0,
    at: new Date(atMs).toISOString(),
    request_id: requestId,
    key_id: null,
    key_name: null,
    tenant: "t",
    model: "m",
    model_served: "m",
    worker: null,
    endpoint: "/v1/chat/completions",
    outcome: "completed",
    status: 200,
    queue_wait_ms: 0,
    first_byte_ms: null,
    duration_ms: 1,
    prompt_tokens: 1,
    completion_tokens: 1,
    cached_tokens: null,
    estimated: false,
  };
}

Deno.test("the fleet cursor reads back what it wrote", () => {
  const r = rec(1764111111123, "req-a:b");
  assert.deepEqual(parseTimeCursor(timeCursorOf(r)), {
    atMs: 1764111111123,
    requestId: "req-a:b",
  });
  assert.equal(parseTimeCursor("17"), null);
  assert.equal(parseTimeCursor("x:req"), null);
});

/** One instance's requestsByTime, as its SQL does it. */
function pageOf(
  file: UsageRecord[],
  after: string | null,
  limit: number,
): UsageRecord[] {
  const c = after === null ? null : parseTimeCursor(after)!;
  return file
    .filter((r) => {
      if (c === null) return true;
      const t = Date.parse(r.at);
      return t < c.atMs || (t === c.atMs && r.request_id < c.requestId);
    })
    .sort(newestFirst)
    .slice(0, limit);
}

Deno.test("paging the merge of 3 instances' files lists every record once, newest first, whatever the split and page size", () => {
  fc.assert(
    fc.property(
      // Few distinct times: many ties, broken by request id.
      fc.array(
        fc.record({ t: fc.integer({ min: 0, max: 6 }), file: fc.nat(2) }),
        { maxLength: 40 },
      ),
      fc.integer({ min: 1, max: 7 }),
      (draws, limit) => {
        const files: UsageRecord[][] = [[], [], []];
        const all = draws.map((d, i) => {
          const r = rec(
            1_764_000_000_000 + d.t,
            `req-${String(i).padStart(3, "0")}`,
          );
          files[d.file]!.push(r);
          return r;
        });
        const seen: UsageRecord[] = [];
        let cursor: string | null = null;
        for (let pages = 0;; pages++) {
          assert.ok(pages <= all.length + 1, "paging never ends");
          const page = mergeRequests(
            files.map((f) => pageOf(f, cursor, limit + 1)),
            limit,
          );
          assert.ok(page.records.length <= limit);
          seen.push(...page.records);
          if (page.nextCursor === null) break;
          cursor = page.nextCursor;
        }
        assert.deepEqual(
          seen.map((r) => r.request_id),
          [...all].sort(newestFirst).map((r) => r.request_id),
        );
      },
    ),
    { numRuns: 300 },
  );
});
