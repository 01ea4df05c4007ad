// Issue 26 on a cluster of real processes: token budgets are decided in the
// replicated core, so a tenant's and a key's hold across 3 instances (requests
// spread over all of them), and each usage record is written once, by the
// instance that held the client; /admin/usage and /admin/requests answer for
// the whole fleet on every instance (cluster/usage_fleet.ts).
import assert from "node:assert/strict";
import { type Fleet, MODEL, withFleet } from "./_fleet.ts";
import { postChat } from "../../../e2e/_post_chat.ts";

const ADMIN = "usage-fleet-admin";
const BUDGET = 60;

async function ask(url: string, key: string): Promise<Response> {
  return await postChat(url, {
    model: MODEL,
    messages: [{ role: "user", content: "count me" }],
    max_tokens: 10,
  }, { headers: { authorization: `Bearer ${key}` } });
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

/**
 * Three instances, one worker named `worker` taking 4 at once from a mock at
 * 1 ms a word, `env` on every instance; `fn` gets the instances' URLs first.
 */
function withThreeInstances(
  worker: string,
  env: Record<string, string>,
  fn: (urls: string[], f: Fleet) => Promise<void>,
): Promise<void> {
  return withFleet({
    instances: 3,
    workers: [{ name: worker, maxConcurrent: 4 }],
    delayMs: 1,
    env,
  }, (f) => fn(f.instances.map((x) => x.url), f));
}

Deno.test("cluster: a tenant's and a key's token budget hold across 3 instances, and each usage record is written once fleet-wide", async () => {
  await withThreeInstances("gpu-f", {
    TENANT_TOKEN_BUDGET_acme: `${BUDGET}tok/day`,
    MODELRELAY_ADMIN_TOKEN: ADMIN,
    MODELRELAY_REQUIRE_API_KEYS: "true",
  }, async (urls, f) => {
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
    // Each record once, and every instance lists them all (fleet-wide):
    // admitted + 1 refusal + 3 refusals.
    const lists: string[][] = [];
    for (const inst of f.instances) {
      const r = await fetch(
        `${inst.url}/admin/requests?tenant=acme&limit=1000`,
        {
          headers: { authorization: `Bearer ${ADMIN}` },
        },
      );
      assert.equal(r.status, 200);
      const body = await r.json() as { requests: { request_id: string }[] };
      lists.push(body.requests.map((x) => x.request_id));
    }
    assert.equal(lists[0]!.length, admitted + 1 + 3);
    assert.equal(new Set(lists[0]).size, lists[0]!.length);
    assert.deepEqual(lists[1], lists[0]);
    assert.deepEqual(lists[2], lists[0]);
  });
});

type UsageAnswer = {
  totals: {
    requests: number;
    prompt_tokens: number;
    completion_tokens: number;
  };
  groups: Record<string, unknown>[];
  missing_instances: string[];
};
type RequestsAnswer = {
  requests: { request_id: string; instance: string }[];
  next_cursor: string | null;
  missing_instances: string[];
};

async function admin<T>(url: string): Promise<T> {
  const r = await fetch(url, { headers: { authorization: `Bearer ${ADMIN}` } });
  const body = await r.json();
  assert.equal(r.status, 200, JSON.stringify(body));
  return body as T;
}

/** Every page of /admin/requests at `url`, `limit` at a time. */
async function allRequests(url: string, limit: number): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 50; pages++) {
    const q: string = cursor === null
      ? ""
      : `&cursor=${encodeURIComponent(cursor)}`;
    const page = await admin<RequestsAnswer>(
      `${url}/admin/requests?limit=${limit}${q}`,
    );
    assert.deepEqual(page.missing_instances, []);
    assert.ok(page.requests.length <= limit);
    ids.push(...page.requests.map((r) => r.request_id));
    if (page.next_cursor === null) return ids;
    cursor = page.next_cursor;
  }
  throw new Error("paging never ended");
}

Deno.test("cluster: /admin/usage and /admin/requests give the same fleet-wide answer on each of 3 instances behind the balancer, and name an instance that does not answer", async () => {
  await withThreeInstances(
    "gpu-u",
    { MODELRELAY_ADMIN_TOKEN: ADMIN },
    async (urls, f) => {
      const from = Date.now() / 1000 - 1;
      // Spread over the instances (each holds a third of the clients) and
      // through the balancer; every record lands in one instance's file.
      const targets = [
        ...urls,
        ...urls,
        ...urls,
        f.balancer.url,
        f.balancer.url,
      ];
      let prompt = 0;
      let completion = 0;
      for (const url of targets) {
        const r = await ask(url, "unused");
        const body = await r.json();
        assert.equal(r.status, 200, JSON.stringify(body));
        prompt += body.usage.prompt_tokens;
        completion += body.usage.completion_tokens;
      }
      const to = Date.now() / 1000 + 1;
      const usages: string[] = [];
      for (const url of [...urls, f.balancer.url]) {
        for (const g of ["tenant", "model", "worker", "key"]) {
          const u = await admin<UsageAnswer>(
            `${url}/admin/usage?group_by=${g}&from=${from}&to=${to}`,
          );
          assert.deepEqual(u.missing_instances, []);
          assert.equal(u.totals.requests, targets.length);
          assert.equal(u.totals.prompt_tokens, prompt);
          assert.equal(u.totals.completion_tokens, completion);
          assert.equal(
            u.groups.reduce((s, x) => s + Number(x.requests), 0),
            targets.length,
          );
          usages.push(JSON.stringify(u));
        }
      }
      // The very same answer, byte for byte, whichever instance was asked.
      for (let i = 4; i < usages.length; i++) {
        assert.equal(usages[i], usages[i % 4]);
      }
      // /admin/requests: every record once, the same order on every instance,
      // pages of 4 crossing instances' files.
      const lists = [];
      for (const url of urls) lists.push(await allRequests(url, 4));
      assert.equal(lists[0]!.length, targets.length);
      assert.equal(new Set(lists[0]).size, targets.length);
      assert.deepEqual(lists[1], lists[0]);
      assert.deepEqual(lists[2], lists[0]);
      const whose = await admin<RequestsAnswer>(
        `${urls[0]}/admin/requests?limit=1000`,
      );
      assert.equal(
        new Set(whose.requests.map((r) => r.instance)).size,
        3,
        "records from every instance's file",
      );
      // The peers' route answers only holders of the cluster secret.
      for (const token of [ADMIN, "guess"]) {
        const r = await fetch(
          `${
            urls[1]
          }/_relay/usage?group_by=tenant&from_ms=0&to_ms=${Date.now()}`,
          { headers: { authorization: `Bearer ${token}` } },
        );
        assert.equal(r.status, 401);
        assert.equal((await r.json()).error.code, "invalid_cluster_secret");
      }
      // An instance that does not answer (stopped, not yet declared dead) is
      // named; the answer holds the others' records.
      const frozen = f.instances[2]!;
      const h = await (await fetch(`${frozen.url}/health`)).json();
      const frozenId = h.cluster.instance as string;
      const frozenCount = whose.requests.filter((r) => r.instance === frozenId)
        .length;
      frozen.child.kill("SIGSTOP");
      try {
        const u = await admin<UsageAnswer>(
          `${urls[0]}/admin/usage?from=${from}&to=${to}`,
        );
        assert.deepEqual(u.missing_instances, [frozenId]);
        assert.equal(u.totals.requests, targets.length - frozenCount);
      } finally {
        frozen.child.kill("SIGCONT");
      }
    },
  );
});

Deno.test("cluster, issue 33: plain streams (no usage asked) spread over 3 instances are counted by their content deltas, where their chunks went direct: a 50 tok/day tenant budget refuses the next stream once spent", async () => {
  await withThreeInstances("gpu-s", {
    TENANT_TOKEN_BUDGET_streamer: "50tok/day",
  }, async (urls) => {
    let admitted = 0;
    for (let i = 0; i < 12; i++) {
      const r = await postChat(urls[i % 3]!, {
        model: MODEL,
        stream: true,
        messages: [{ role: "user", content: "count my stream" }],
      }, { headers: { "x-tenant-id": "streamer" } });
      const text = await r.text();
      if (r.status === 429) {
        assert.equal(JSON.parse(text).error.code, "token_budget_exceeded");
        assert.ok(admitted >= 2, `refused after only ${admitted} streams`);
        return;
      }
      assert.equal(r.status, 200, text);
      assert.ok(text.includes('"content"'), "a stream of content deltas");
      admitted++;
    }
    assert.fail(`${admitted} plain streams passed a 50 tok/day budget`);
  });
});
