// Issue 26 on a cluster of real processes: token budgets are decided in the
// replicated core, so a tenant's and a key's hold across 3 instances (requests
// spread over all of them), and each usage record is written once, by the
// instance that held the client.
import assert from "node:assert/strict";
import { MODEL, withFleet } from "./_fleet.ts";

const ADMIN = "usage-fleet-admin";
const BUDGET = 60;

async function ask(url: string, key: string): Promise<Response> {
  return await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${key}`,
    },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: "user", content: "count me" }],
      max_tokens: 10,
    }),
  });
}

/** Asks instance i % 3 in turn until a 429; checks every admission saw the fleet's total below `budget`. */
async function spendUntilRefused(
  urls: string[],
  key: string,
  budget: number,
): Promise<number> {
  let used = 0;
  let admitted = 0;
  for (let i = 0; i < 20; i++) {
    const r = await ask(urls[i % 3]!, key);
    const body = await r.json();
    if (r.status !== 200) {
      assert.equal(r.status, 429, JSON.stringify(body));
      assert.equal(body.error.code, "token_budget_exceeded");
      assert.ok(Number(r.headers.get("retry-after")) >= 1);
      assert.ok(used >= budget);
      assert.ok(admitted >= 3, `only ${admitted} admitted: not spread over 3`);
      // Every instance refuses now, whichever took the requests.
      for (const url of urls) {
        const again = await ask(url, key);
        assert.equal(again.status, 429);
        assert.equal((await again.json()).error.code, "token_budget_exceeded");
      }
      return admitted;
    }
    assert.ok(used < budget, `admitted at ${used} tokens`);
    used += body.usage.prompt_tokens + body.usage.completion_tokens;
    admitted++;
  }
  throw new Error("never refused");
}

Deno.test("cluster: a tenant's and a key's token budget hold across 3 instances, and each usage record is written once fleet-wide", async () => {
  await withFleet({
    instances: 3,
    workers: [{ name: "gpu-f", maxConcurrent: 4 }],
    delayMs: 1,
    env: {
      TENANT_TOKEN_BUDGET_acme: `${BUDGET}tok/day`,
      MODELRELAY_ADMIN_TOKEN: ADMIN,
      MODELRELAY_REQUIRE_API_KEYS: "true",
    },
  }, async (f) => {
    const urls = f.instances.map((x) => x.url);
    const newKey = async (body: Record<string, unknown>) =>
      await (await fetch(`${urls[0]}/admin/keys`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${ADMIN}`,
          "content-type": "application/json",
        },
        body: JSON.stringify(body),
      })).json() as { id: string; secret: string };
    const acme = await newKey({ name: "acme", tenant: "acme" });
    const own = await newKey({
      name: "own",
      tenant: "beta",
      token_budget: "40tok/hour",
    });
    // Created on the first instance; usable on the others within a log hop
    // (/v1/capabilities checks the key and spends nothing).
    for (const url of urls) {
      for (const k of [acme, own]) {
        for (let t = 0;; t++) {
          const r = await fetch(`${url}/v1/capabilities`, {
            headers: { authorization: `Bearer ${k.secret}` },
          });
          await r.body?.cancel();
          if (r.status !== 401) break;
          assert.ok(t < 50, `key ${k.id} unknown at ${url}`);
          await new Promise((res) => setTimeout(res, 100));
        }
      }
    }
    const admitted = await spendUntilRefused(urls, acme.secret, BUDGET);
    await spendUntilRefused(urls, own.secret, 40);
    // Each record once: the three instances' ledgers together hold every
    // request exactly once (admitted + 1 refusal + 3 refusals).
    const ids: string[] = [];
    for (const inst of f.instances) {
      const r = await fetch(
        `${inst.url}/admin/requests?tenant=acme&limit=1000`,
        {
          headers: { authorization: `Bearer ${ADMIN}` },
        },
      );
      assert.equal(r.status, 200);
      const body = await r.json() as { requests: { request_id: string }[] };
      ids.push(...body.requests.map((x) => x.request_id));
    }
    assert.equal(ids.length, admitted + 1 + 3);
    assert.equal(new Set(ids).size, ids.length);
  });
});
