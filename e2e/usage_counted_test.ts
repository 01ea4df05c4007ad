// Issue 33 end to end, real processes (mock backend, server, worker): a field
// named include_usage anywhere but stream_options does not turn stream counting
// off, and concurrent requests cannot beat a token budget that was checked
// before any of them ended (what each may use is reserved at admission).
import assert from "node:assert/strict";
import {
  type Cluster,
  type ClusterOptions,
  MODEL,
  withCluster,
} from "./_cluster.ts";
import { postChat } from "./_post_chat.ts";
import { type UsageRecord, usageRecords } from "./_usage_records.ts";

const ADMIN = "e2e-usage-counted-admin";

/**
 * One worker taking `maxConcurrent` at once from a mock that streams a word
 * every `delayMs`, behind a server with the admin token and a token `budget`
 * for `tenant`.
 */
function budgeted(
  tenant: string,
  budget: string,
  maxConcurrent: number,
  delayMs: number,
): ClusterOptions {
  return {
    workers: [{ name: "gpu-a", maxConcurrent }],
    delayMs,
    serverEnv: {
      MODELRELAY_ADMIN_TOKEN: ADMIN,
      [`TENANT_TOKEN_BUDGET_${tenant}`]: budget,
    },
  };
}

function records(c: Cluster, tenant: string): Promise<UsageRecord[]> {
  return usageRecords(c.serverUrl, ADMIN, `tenant=${tenant}&limit=200`);
}

function chat(
  c: Cluster,
  tenant: string,
  extra: Record<string, unknown>,
): Promise<Response> {
  return postChat(c.serverUrl, {
    model: MODEL,
    messages: [{ role: "user", content: "tell me a story" }],
    ...extra,
  }, { headers: { "x-tenant-id": tenant } });
}

Deno.test("issue 33 a metadata field named include_usage does not turn counting off: 30 streams under a 200 tok/day budget are refused before the end", async () => {
  await withCluster(budgeted("tb", "200tok/day", 4, 1), async (c) => {
    const statuses: number[] = [];
    for (let i = 0; i < 30; i++) {
      const r = await chat(c, "tb", {
        stream: true,
        max_tokens: 20,
        metadata: { include_usage: true },
      });
      statuses.push(r.status);
      const text = await r.text();
      if (r.status === 429) {
        assert.match(text, /token_budget_exceeded/);
      } else {
        // The client's stream is the backend's: no usage was asked, none came.
        assert.doesNotMatch(text, /"usage"/);
      }
    }
    const ok = statuses.filter((s) => s === 200).length;
    assert.ok(ok < 30, "all 30 streams passed a 200 tok/day budget");
    assert.ok(ok >= 1);
    const recs = (await records(c, "tb")).filter((r) => r.status === 200);
    assert.equal(recs.length, ok);
    for (const r of recs) {
      // "user" + "tell me a story": 19 characters, 4 a token.
      assert.equal(r.prompt_tokens, 5);
      assert.equal(r.completion_tokens, 20);
      assert.equal(r.estimated, true);
    }
    // Charged as counted: admitted while the window had room.
    assert.ok((ok - 1) * 25 < 200, `${ok} admitted`);
  });
});

Deno.test("issue 33 40 concurrent requests stay within a 100 tok/day budget: each reserves its prompt and max_tokens at admission", async () => {
  // Slow enough (50 ms a word) that the 40 are all in flight before any ends.
  await withCluster(budgeted("tc", "100tok/day", 8, 50), async (c) => {
    const answers = await Promise.all(
      Array.from({ length: 40 }, () => chat(c, "tc", { max_tokens: 10 })),
    );
    let ok = 0;
    for (const r of answers) {
      const body = await r.text();
      if (r.status === 200) ok++;
      else {
        assert.equal(r.status, 429, body);
        assert.match(body, /token_budget_exceeded/);
      }
    }
    const used = (await records(c, "tc"))
      .filter((r) => r.status === 200)
      .reduce(
        (n, r) => n + (r.prompt_tokens ?? 0) + (r.completion_tokens ?? 0),
        0,
      );
    assert.ok(ok >= 1);
    assert.ok(
      used <= 100,
      `${ok} admitted used ${used} of a 100 tok/day budget`,
    );
  });
});
