// Issue 26 end to end, real processes (mock backend, server, worker) and the
// official SDKs: every request leaves a usage record equal to the usage the
// backend reported; /admin/usage totals are exact; /admin/requests filters and
// pages; token limits answer 429 with Retry-After on a tenant and on a key.
import OpenAI from "openai";
import assert from "node:assert/strict";
import { type Cluster, MODEL, withCluster } from "./_cluster.ts";
import { anthropicAt, openaiAt } from "./_sdk.ts";
import { postChat } from "./_post_chat.ts";
import { type UsageRecord, usageRecords } from "./_usage_records.ts";

const ADMIN = "e2e-admin-token";
const MODEL_2 = "mock-model-2";
const WORKERS = [{ name: "gpu-a", maxConcurrent: 4 }];

async function admin(
  c: Cluster,
  path: string,
  init: RequestInit = {},
): Promise<Record<string, unknown>> {
  const r = await fetch(`${c.serverUrl}${path}`, {
    ...init,
    headers: {
      authorization: `Bearer ${ADMIN}`,
      "content-type": "application/json",
    },
  });
  const body = await r.json() as Record<string, unknown>;
  assert.ok(r.ok, `${path}: ${r.status} ${JSON.stringify(body)}`);
  return body;
}

async function newKey(
  c: Cluster,
  name: string,
  extra: Record<string, unknown> = {},
): Promise<{ id: string; secret: string }> {
  const k = await admin(c, "/admin/keys", {
    method: "POST",
    body: JSON.stringify({ name, ...extra }),
  });
  return { id: String(k.id), secret: String(k.secret) };
}

function records(c: Cluster, query: string): Promise<UsageRecord[]> {
  return usageRecords(c.serverUrl, ADMIN, query);
}

function openai(c: Cluster, key: string): OpenAI {
  return openaiAt(c.serverUrl, { apiKey: key });
}

const SERVER_ENV = {
  MODELRELAY_ADMIN_TOKEN: ADMIN,
  MODELRELAY_REQUIRE_API_KEYS: "true",
};

type Seen = { endpoint: string; prompt: number; completion: number };

/** One request per endpoint and shape through the SDKs, with the usage each answer reported. */
async function everyEndpoint(c: Cluster, key: string): Promise<Seen[]> {
  const oa = openai(c, key);
  const seen: Seen[] = [];
  const see = (endpoint: string, prompt: number, completion: number) =>
    seen.push({ endpoint, prompt, completion });
  const chat = await oa.chat.completions.create({
    model: MODEL,
    messages: [{ role: "user", content: "one two three" }],
    max_tokens: 5,
  });
  see(
    "/v1/chat/completions",
    chat.usage!.prompt_tokens,
    chat.usage!.completion_tokens,
  );
  const stream = await oa.chat.completions.create({
    model: MODEL,
    messages: [{ role: "user", content: "stream with usage please" }],
    max_tokens: 6,
    stream: true,
    stream_options: { include_usage: true },
  });
  let usage: OpenAI.CompletionUsage | null | undefined = null;
  for await (const chunk of stream) usage = chunk.usage ?? usage;
  see("/v1/chat/completions", usage!.prompt_tokens, usage!.completion_tokens);
  const resp = await oa.responses.create({
    model: MODEL,
    input: "responses input words",
    max_output_tokens: 4,
  });
  see("/v1/responses", resp.usage!.input_tokens, resp.usage!.output_tokens);
  const rstream = await oa.responses.create({
    model: MODEL,
    input: "responses streamed",
    max_output_tokens: 3,
    stream: true,
  });
  let rusage: OpenAI.Responses.ResponseUsage | undefined;
  for await (const e of rstream) {
    if (e.type === "response.completed") rusage = e.response.usage;
  }
  see("/v1/responses", rusage!.input_tokens, rusage!.output_tokens);
  const comp = await oa.completions.create({
    model: MODEL,
    prompt: "complete this",
    max_tokens: 7,
  });
  see(
    "/v1/completions",
    comp.usage!.prompt_tokens,
    comp.usage!.completion_tokens,
  );
  const an = anthropicAt(c.serverUrl, { apiKey: key });
  const msg = await an.messages.create({
    model: MODEL,
    max_tokens: 8,
    messages: [{ role: "user", content: "anthropic says hi" }],
  });
  see("/v1/messages", msg.usage.input_tokens, msg.usage.output_tokens);
  const mstream = an.messages.stream({
    model: MODEL,
    max_tokens: 3,
    messages: [{ role: "user", content: "anthropic streams" }],
  });
  const final = await mstream.finalMessage();
  see("/v1/messages", final.usage.input_tokens, final.usage.output_tokens);
  // Embeddings (issue 25 routes them): the backend's prompt count; its total
  // equals it, so the completion is 0 (total - prompt), not unknown.
  for (const input of ["embed these four words", ["alpha beta", "gamma"]]) {
    const emb = await oa.embeddings.create({ model: MODEL, input });
    assert.ok(emb.usage.prompt_tokens > 0);
    seen.push({
      endpoint: "/v1/embeddings",
      prompt: emb.usage.prompt_tokens,
      completion: emb.usage.total_tokens - emb.usage.prompt_tokens,
    });
  }
  return seen;
}

/** A chat stream's raw bytes, with the mock's per-answer id and time blanked. */
async function rawStream(url: string, key: string | null): Promise<string> {
  const r = await keyedChat(url, key, "raw", { max_tokens: 9, stream: true });
  assert.equal(r.status, 200);
  return (await r.text()).replaceAll(/"id":"mock-\d+"/g, '"id":"X"')
    .replaceAll(/"created":\d+/g, '"created":0');
}

Deno.test("issue 26 usage ledger: records equal the backend's usage per endpoint, estimates a stream without usage, totals and paging are exact", async (t) => {
  await withCluster({
    workers: WORKERS,
    delayMs: 1,
    serverEnv: { ...SERVER_ENV, MODEL_ALIASES: `fast=${MODEL}` },
    extraModels: [MODEL_2],
  }, async (c) => {
    const a = await newKey(c, "alice", { tenant: "team-a" });
    const b = await newKey(c, "bob", { tenant: "team-b" });
    const k3 = await newKey(c, "carol", { tenant: "team-c" });

    await t.step(
      "each endpoint's record equals the usage its answer carried",
      async () => {
        const seen = await everyEndpoint(c, a.secret);
        const recs = (await records(c, `key=${a.id}`)).reverse();
        assert.equal(recs.length, seen.length);
        recs.forEach((r, i) => {
          const s = seen[i]!;
          assert.equal(r.endpoint, s.endpoint, `record ${i}`);
          assert.equal(
            r.prompt_tokens,
            s.prompt,
            `prompt of ${s.endpoint} #${i}`,
          );
          assert.equal(
            r.completion_tokens,
            s.completion,
            `completion of ${s.endpoint} #${i}`,
          );
          assert.equal(r.estimated, false);
          assert.equal(r.key_name, "alice");
          assert.equal(r.tenant, "team-a");
          assert.equal(r.worker, "gpu-a");
          assert.equal(r.outcome, "completed");
          assert.equal(r.status, 200);
        });
      },
    );

    await t.step(
      "a chat stream without usage reaches the client as directly and is recorded as its deltas, estimated",
      async () => {
        const relayed = await rawStream(c.serverUrl, b.secret);
        const direct = await rawStream(c.mockUrl, null);
        assert.equal(relayed, direct);
        assert.ok(!relayed.includes('"usage"'));
        const [r] = await records(c, `key=${b.id}&limit=1`);
        assert.equal(r?.completion_tokens, 9);
        // Issue 33: the prompt estimated from the body ("user" + "raw": 7
        // characters, 4 a token).
        assert.equal(r?.prompt_tokens, 2);
        assert.equal(r?.estimated, true);
      },
    );

    await t.step(
      "/admin/usage totals are exact over 3 keys x 2 models for each group_by",
      async () => {
        const from = Date.now();
        const keys = [a, b, k3];
        // Key i asks model m (i + 1) times with max_tokens (i + 2) * (m + 1).
        const want = new Map<
          string,
          { req: number; comp: number; prompt: number }
        >();
        const add = (g: string, comp: number, prompt: number) => {
          const w = want.get(g) ?? { req: 0, comp: 0, prompt: 0 };
          w.req++;
          w.comp += comp;
          w.prompt += prompt;
          want.set(g, w);
        };
        for (const [i, k] of keys.entries()) {
          const oa = openai(c, k.secret);
          for (const [m, model] of [MODEL, MODEL_2].entries()) {
            for (let n = 0; n <= i; n++) {
              const r = await oa.chat.completions.create({
                model,
                messages: [{ role: "user", content: `key ${i} model ${m}` }],
                max_tokens: (i + 2) * (m + 1),
              });
              const p = r.usage!.prompt_tokens;
              const comp = r.usage!.completion_tokens;
              assert.equal(comp, (i + 2) * (m + 1));
              add(`key:${k.id}`, comp, p);
              add(`tenant:team-${"abc"[i]}`, comp, p);
              add(`model:${model}`, comp, p);
              add("worker:gpu-a", comp, p);
            }
          }
        }
        // The server stamps a record when the request finishes, which may be a
        // moment after the client has its answer: a second of slack (nothing
        // else is asked meanwhile).
        const to = Date.now() + 1_000;
        for (const group of ["key", "tenant", "model", "worker"]) {
          const u = await admin(
            c,
            `/admin/usage?group_by=${group}&from=${from / 1000}&to=${
              new Date(to).toISOString()
            }`,
          );
          const groups = u.groups as Array<Record<string, unknown>>;
          const expected = [...want.entries()].filter(([g]) =>
            g.startsWith(`${group}:`)
          );
          assert.equal(
            groups.length,
            expected.length,
            `${group}: ${JSON.stringify(groups)}`,
          );
          for (const [g, w] of expected) {
            const got = groups.find((x) => `${group}:${x[group]}` === g);
            assert.ok(
              got !== undefined,
              `${g} missing in ${JSON.stringify(groups)}`,
            );
            assert.equal(
              got.requests,
              w.req,
              `${g}: ${JSON.stringify(got)} from ${from} ${
                JSON.stringify(await admin(c, "/admin/requests?limit=30"))
              }`,
            );
            assert.equal(got.completion_tokens, w.comp, g);
            assert.equal(got.prompt_tokens, w.prompt, g);
            assert.equal(got.errors, 0, g);
          }
          const totals = u.totals as Record<string, number>;
          assert.equal(totals.requests, 12);
          assert.equal(
            totals.completion_tokens,
            2 * (2 + 6 + 12) + 4 * 0 + (2 + 6 + 12) * 1,
          );
        }
      },
    );

    await t.step(
      "a request for an alias is recorded as asked and as served",
      async () => {
        const r = await openai(c, k3.secret).chat.completions.create({
          model: "fast",
          messages: [{ role: "user", content: "alias" }],
          max_tokens: 2,
        });
        assert.equal(r.usage!.completion_tokens, 2);
        const [rec] = await records(c, `key=${k3.id}&limit=1`) as Array<
          UsageRecord & { model_served: string }
        >;
        assert.equal(rec?.model, "fast");
        assert.equal(rec?.model_served, MODEL);
        // Found by either name.
        assert.equal((await records(c, "model=fast")).length, 1);
      },
    );

    await t.step(
      "/admin/requests filters by key, tenant, model and status, and pages with its cursor",
      async () => {
        const byModel = await records(c, `model=${MODEL_2}&limit=1000`);
        assert.equal(byModel.length, 6);
        assert.ok(byModel.every((r) => r.model === MODEL_2));
        const byTenant = await records(c, "tenant=team-c");
        assert.equal(byTenant.length, 7); // 6 in the matrix, 1 by alias
        assert.ok(byTenant.every((r) => r.key_id === k3.id));
        const ok200 = await records(c, "status=200");
        // 9 through everyEndpoint, 1 raw stream, 12 in the matrix, 1 by alias.
        assert.equal(ok200.length, 9 + 1 + 12 + 1);
        assert.equal(
          (await records(c, "status=completed&limit=1000")).length,
          23,
        );
        assert.equal((await records(c, "status=429")).length, 0);
        // Pages of 4, newest first, each record once.
        const all = await records(c, "limit=1000");
        const paged: UsageRecord[] = [];
        let cursor: string | null = "";
        while (cursor !== null) {
          const body = await admin(
            c,
            `/admin/requests?limit=4${
              cursor === "" ? "" : `&cursor=${cursor}`
            }`,
          );
          paged.push(...body.requests as UsageRecord[]);
          cursor = body.next_cursor as string | null;
        }
        assert.deepEqual(paged.map((r) => r.id), all.map((r) => r.id));
        assert.ok(all.every((r, i) => i === 0 || r.id < all[i - 1]!.id));
        const bad = await fetch(`${c.serverUrl}/admin/requests?status=nope`, {
          headers: { authorization: `Bearer ${ADMIN}` },
        });
        assert.equal(bad.status, 400);
        await bad.body?.cancel();
      },
    );
  });
});

/** A chat (MODEL, one user message saying `content`, then `fields`) with `key` as its bearer (none when null). */
function keyedChat(
  url: string,
  key: string | null,
  content: string,
  fields: Record<string, unknown>,
): Promise<Response> {
  return postChat(url, {
    model: MODEL,
    messages: [{ role: "user", content }],
    ...fields,
  }, { headers: key === null ? {} : { authorization: `Bearer ${key}` } });
}

async function refused(r: Response, code: string): Promise<number> {
  const body = await r.json() as { error: { code: string } };
  assert.equal(r.status, 429, JSON.stringify(body));
  assert.equal(body.error.code, code);
  const retry = Number(r.headers.get("retry-after"));
  assert.ok(retry >= 1, `Retry-After ${r.headers.get("retry-after")}`);
  return retry;
}

Deno.test("issue 26 token limits: token_rate_limited and token_budget_exceeded with Retry-After, on a tenant and on a key", async (t) => {
  await withCluster({
    workers: WORKERS,
    delayMs: 1,
    serverEnv: {
      ...SERVER_ENV,
      "TENANT_RATE_LIMIT_team-rate": "1000req/min,30tok/min",
      "TENANT_TOKEN_BUDGET_team-budget": "30tok/day",
    },
  }, async (c) => {
    const rate = await newKey(c, "rate", { tenant: "team-rate" });
    const budget = await newKey(c, "budget", { tenant: "team-budget" });
    const keyRate = await newKey(c, "key-rate", {
      tenant: "team-free",
      rate_limit: "20tok/min",
    });
    const keyBudget = await newKey(c, "key-budget", {
      tenant: "team-free",
      token_budget: "20tok/hour",
    });

    await t.step("the key's limits are listed with it", async () => {
      const list = (await admin(c, "/admin/keys")).keys as Array<
        Record<string, unknown>
      >;
      const kr = list.find((k) => k.id === keyRate.id)!;
      assert.equal(kr.rate_limit, "20tok/min");
      assert.equal(kr.token_budget, null);
      const kb = list.find((k) => k.id === keyBudget.id)!;
      assert.equal(kb.token_budget, "20tok/hour");
      const bad = await fetch(`${c.serverUrl}/admin/keys`, {
        method: "POST",
        headers: { authorization: `Bearer ${ADMIN}` },
        body: JSON.stringify({ name: "x", token_budget: "lots" }),
      });
      assert.equal(bad.status, 400);
      await bad.body?.cancel();
    });

    const cases = [
      {
        what: "a tenant's tok/min",
        key: rate,
        code: "token_rate_limited",
        maxRetry: 61,
      },
      {
        what: "a tenant's tok/day budget",
        key: budget,
        code: "token_budget_exceeded",
        maxRetry: 86_400 + 24 * 60 + 1,
      },
      {
        what: "a key's tok/min",
        key: keyRate,
        code: "token_rate_limited",
        maxRetry: 61,
      },
      {
        what: "a key's tok/hour budget",
        key: keyBudget,
        code: "token_budget_exceeded",
        maxRetry: 3601 + 60,
      },
    ];
    for (const k of cases) {
      await t.step(
        `${k.what}: admitted below the limit, 429 ${k.code} at it`,
        async () => {
          // Each answer is the prompt (a few tokens) plus 10 completion tokens.
          let admitted = 0;
          for (;;) {
            const r = await keyedChat(c.serverUrl, k.key.secret, "hi", {
              max_tokens: 10,
            });
            if (r.status !== 200) {
              const retry = await refused(r, k.code);
              assert.ok(retry <= k.maxRetry, `Retry-After ${retry}`);
              break;
            }
            await r.body?.cancel();
            admitted++;
            assert.ok(admitted <= 3, "never refused");
          }
          assert.ok(admitted >= 1);
          // The refusal left a record, rejected with 429, and charged nothing.
          const [last] = await records(c, `key=${k.key.id}&limit=1`);
          assert.equal(last?.status, 429);
          assert.equal(last?.outcome, "rejected");
          assert.equal(last?.completion_tokens, null);
        },
      );
    }
  });
});
