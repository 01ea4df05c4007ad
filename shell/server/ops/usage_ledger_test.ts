import assert from "node:assert/strict";
import { initialState, makeConfig } from "../../../core/mod.ts";
import { openRelayDatabase } from "./api_keys.ts";
import { Metrics } from "./metrics.ts";
import { parseTime, requestFilter } from "./usage_http.ts";
import { FLUSH_ROWS, openUsageLedger } from "./usage_ledger.ts";
import { finished } from "./_finished.ts";
import { assertLines } from "./_exposition.ts";

const DAY = 86_400_000;

function withLedger(
  retentionDays: number,
  body: (
    ledger: ReturnType<typeof openUsageLedger>,
    count: () => number,
  ) => void,
): void {
  const db = openRelayDatabase(":memory:");
  const errors: unknown[] = [];
  const ledger = openUsageLedger(db, retentionDays, (e) => errors.push(e));
  try {
    body(
      ledger,
      () =>
        Number(
          db.prepare("SELECT COUNT(*) AS n FROM usage_records").get()!.n,
        ),
    );
    assert.deepEqual(errors, []);
  } finally {
    ledger.close();
    db.close();
  }
}

Deno.test("issue 26 records wait in memory and reach the database in one batch: on a read, at FLUSH_ROWS, or on close", async () => {
  await withLedgerAsync(30, async (ledger, count) => {
    ledger.record(finished(), 1_000);
    ledger.record(finished({ requestId: "r2" }), 1_001);
    assert.equal(count(), 0);
    const page = ledger.requests({ limit: 10 });
    assert.equal(count(), 2);
    assert.deepEqual(page.records.map((r) => r.request_id), ["r2", "r1"]);
    assert.equal(page.records[0]!.duration_ms, 12);
    for (let i = 0; i < FLUSH_ROWS; i++) {
      ledger.record(finished({ requestId: `b${i}` }), 2_000);
    }
    // Not in the request's turn: at the next one.
    assert.equal(count(), 2);
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(count(), 2 + FLUSH_ROWS);
  });
});

async function withLedgerAsync(
  retentionDays: number,
  body: (
    ledger: ReturnType<typeof openUsageLedger>,
    count: () => number,
  ) => Promise<void>,
): Promise<void> {
  const db = openRelayDatabase(":memory:");
  const ledger = openUsageLedger(db, retentionDays, (e) => {
    throw e;
  });
  try {
    await body(
      ledger,
      () =>
        Number(
          db.prepare("SELECT COUNT(*) AS n FROM usage_records").get()!.n,
        ),
    );
  } finally {
    ledger.close();
    db.close();
  }
}

Deno.test("issue 26 usage totals group by key, tenant, model and worker within [from, to)", () => {
  withLedger(30, (ledger) => {
    ledger.record(finished(), 1_000);
    ledger.record(
      finished({
        keyId: "key_2",
        tenant: "beta",
        status: 502,
        outcome: "failed",
        usage: { prompt: 1, completion: 2, cached: 4, estimated: true },
      }),
      1_500,
    );
    ledger.record(finished(), 5_000); // outside
    const u = ledger.usage("tenant", 0, 2_000);
    assert.deepEqual(u.totals, {
      requests: 2,
      errors: 1,
      prompt_tokens: 11,
      completion_tokens: 7,
      cached_tokens: 4,
      estimated_requests: 1,
    });
    assert.deepEqual(u.groups.map((g) => [g.tenant, g.requests]), [
      ["acme", 1],
      ["beta", 1],
    ]);
    assert.equal(ledger.usage("worker", 0, 10_000).groups[0]!.requests, 3);
    assert.equal(ledger.usage("key", 0, 10_000).groups[0]!.key, "key_1");
  });
});

Deno.test("issue 26 records older than USAGE_RETENTION_DAYS are deleted", () => {
  withLedger(2, (ledger, count) => {
    ledger.record(finished(), 0);
    ledger.record(finished(), 3 * DAY);
    ledger.flush();
    assert.equal(count(), 1);
    ledger.record(finished(), 3 * DAY + 1);
    assert.equal(ledger.prune(3 * DAY + 1), 0);
    ledger.flush();
    assert.equal(ledger.prune(6 * DAY), 2);
  });
});

Deno.test("issue 26 /admin/requests query: status is an HTTP status or an outcome, limit capped at 1000", () => {
  assert.deepEqual(
    requestFilter(new URLSearchParams("status=429&limit=5000&cursor=7")),
    { limit: 1000, status: 429, before: 7 },
  );
  assert.deepEqual(requestFilter(new URLSearchParams("status=failed")), {
    limit: 100,
    outcome: "failed",
  });
  assert.equal(typeof requestFilter(new URLSearchParams("limit=0")), "string");
  assert.equal(typeof requestFilter(new URLSearchParams("cursor=x")), "string");
  assert.equal(parseTime("1700000000"), 1_700_000_000_000);
  assert.equal(parseTime("1700000000.5"), 1_700_000_000_500);
  assert.equal(
    parseTime("2026-11-25T10:00:00+01:00"),
    Date.parse("2026-11-25T09:00:00Z"),
  );
  assert.equal(parseTime("yesterday"), null);
  assert.equal(parseTime("2026-11-25"), null);
});

Deno.test("issue 26 modelrelay_tokens_total counts prompt and completion tokens by tenant and model", () => {
  const metrics = new Metrics(0);
  metrics.onEffect(finished());
  metrics.onEffect(
    finished({
      usage: { prompt: 2, completion: 3, cached: null, estimated: true },
    }),
  );
  metrics.onEffect(
    finished({
      tenant: "beta",
      usage: { prompt: null, completion: null, cached: null, estimated: false },
    }),
  );
  const text = metrics.prometheus(initialState(makeConfig()), 0);
  assertLines(text, [
    'modelrelay_tokens_total{tenant="acme",model="m",kind="prompt"} 12',
    'modelrelay_tokens_total{tenant="acme",model="m",kind="completion"} 8',
  ]);
  assert.doesNotMatch(text, /tokens_total\{tenant="beta"/);
});

Deno.test("issue 26 requestsByTime lists newest first by time then request id, after a fleet cursor, with the filter", () => {
  withLedger(30, (ledger) => {
    // Recorded out of time order: the fleet's order is by time, not by row id.
    ledger.record(finished({ requestId: "r-b" }), 5_000);
    ledger.record(finished({ requestId: "r-a" }), 5_000);
    ledger.record(finished({ requestId: "r-c" }), 4_000);
    ledger.record(finished({ requestId: "r-d", tenant: "beta" }), 6_000);
    ledger.record(finished({ requestId: "r-e" }), 7_000);
    const ids = (after: { atMs: number; requestId: string } | null) =>
      ledger.requestsByTime({ limit: 10, tenant: "acme" }, after).map((r) =>
        r.request_id
      );
    assert.deepEqual(ids(null), ["r-e", "r-b", "r-a", "r-c"]);
    assert.deepEqual(ids({ atMs: 5_000, requestId: "r-b" }), ["r-a", "r-c"]);
    assert.deepEqual(ids({ atMs: 5_000, requestId: "r-a" }), ["r-c"]);
    assert.deepEqual(ids({ atMs: 4_000, requestId: "r-c" }), []);
    assert.deepEqual(
      ledger.requestsByTime({ limit: 2 }, null).map((r) => r.request_id),
      ["r-e", "r-d"],
    );
  });
});
