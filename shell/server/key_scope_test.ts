// Issue 15: an API key bound to a tenant and a priority ceiling decides who the
// client is; headers can only narrow it. Real relay, real keys, real limits.
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import {
  admin,
  ADMIN_TOKEN,
  startTestRelay,
  type TestRelay,
} from "./_relay_test_helpers.ts";
import {
  chatBody,
  testConfig,
  type TestWorker,
  waitFor,
  withRegisteredWorker,
} from "./_test_helpers.ts";
import { openSqliteKeyStore, SCHEMA_VERSION } from "./ops/api_keys.ts";
import { withTempDir } from "../with_closing.ts";

type Core = Parameters<typeof testConfig>[0];

function keyRelay(core: Core = {}, dbPath = ":memory:"): Promise<TestRelay> {
  return startTestRelay(testConfig(core, {
    adminToken: ADMIN_TOKEN,
    requireApiKeys: true,
    dbPath,
  }));
}

async function createKey(
  relay: TestRelay,
  body: Record<string, unknown>,
): Promise<Record<string, unknown> & { key: string; id: string }> {
  const res = await admin(relay, "/admin/keys", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 201);
  return await res.json();
}

function post(
  relay: TestRelay,
  key: string,
  headers: Record<string, string> = {},
  path = "/v1/chat/completions",
  body = chatBody(),
): Promise<Response> {
  return fetch(relay.url + path, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, ...headers },
    body,
  });
}

/** Sends one request and answers it at the worker; returns the status and the frame. */
async function roundTrip(
  relay: TestRelay,
  w: TestWorker,
  key: string,
  headers: Record<string, string> = {},
): Promise<number> {
  const pending = post(relay, key, headers);
  const res = await Promise.race([
    pending,
    w.next("request", 2000).then((f) => {
      w.complete(f, 200, "{}");
      return pending;
    }),
  ]);
  await res.text();
  return res.status;
}

Deno.test("a key bound to a tenant cannot escape its rate limit with another X-Tenant-ID (403 tenant_mismatch)", async () => {
  await withRegisteredWorker(
    keyRelay({
      defaultRateLimit: { limit: 2, windowMs: 60_000 },
    }),
    {},
    async (relay, w) => {
      const k = await createKey(relay, {
        name: "team-a app",
        tenant: "team-a",
      });
      assert.equal(k.tenant, "team-a");
      assert.equal(k.max_priority, "normal");
      // Counted as team-a whether or not it says so.
      assert.equal(await roundTrip(relay, w, k.key), 200);
      assert.equal(
        await roundTrip(relay, w, k.key, { "x-tenant-id": "team-a" }),
        200,
      );
      const limited = await post(relay, k.key);
      assert.equal(limited.status, 429);
      assert.equal((await limited.json()).error.code, "rate_limit_exceeded");
      // Another tenant's name does not reset the limit: refused, in each route's shape.
      const escape = await post(relay, k.key, { "x-tenant-id": "team-b" });
      assert.equal(escape.status, 403);
      const body = await escape.json();
      assert.equal(body.error.code, "tenant_mismatch");
      assert.equal(body.error.type, "permission_error");
      assert.match(body.error.message, /"team-a".*"team-b"/);
      const anthropic = await post(
        relay,
        k.key,
        { "x-tenant-id": "team-b" },
        "/v1/messages",
        JSON.stringify({ model: "m1", max_tokens: 5, messages: [] }),
      );
      assert.equal(anthropic.status, 403);
      const ab = await anthropic.json();
      assert.equal(ab.type, "error");
      assert.equal(ab.error.type, "permission_error");
      assert.match(ab.error.message, /tenant_mismatch|belongs to tenant/);
      assert.equal(relay.metrics.authFailures.get("tenant_mismatch"), 2);
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(w.frames.filter((f) => f.type === "request").length, 2);
      // The forwarded requests carried the key's tenant.
      for (const f of w.frames.filter((f) => f.type === "request")) {
        assert.equal(
          (f.headers as Record<string, string>)["x-tenant-id"],
          "team-a",
        );
      }
      // Metrics report the key's tenant.
      assert.equal(relay.metrics.tenantRequests.size > 0, true);
      for (const label of relay.metrics.tenantRequests.keys()) {
        assert.match(label, /^team-a/);
      }
    },
  );
});

Deno.test("a key created with may_name_tenants (a trusted gateway) may name tenants, each with its own limit", async () => {
  await withRegisteredWorker(
    keyRelay({
      defaultRateLimit: { limit: 1, windowMs: 60_000 },
    }),
    {},
    async (relay, w) => {
      const k = await createKey(relay, {
        name: "gateway",
        may_name_tenants: true,
      });
      assert.equal(k.tenant, null);
      assert.equal(k.may_name_tenants, true);
      assert.equal(
        await roundTrip(relay, w, k.key, { "x-tenant-id": "t1" }),
        200,
      );
      assert.equal(
        await roundTrip(relay, w, k.key, { "x-tenant-id": "t2" }),
        200,
      );
      const again = await post(relay, k.key, { "x-tenant-id": "t1" });
      assert.equal(again.status, 429);
      await again.body?.cancel();
    },
  );
});

Deno.test("X-Priority above the key's ceiling is lowered to it", async () => {
  await withRegisteredWorker(
    keyRelay(),
    { max_concurrent: 1 },
    async (relay, w) => {
      const low = await createKey(relay, {
        name: "batch",
        tenant: "batch",
        max_priority: "low",
      });
      const normal = await createKey(relay, { name: "app", tenant: "app" });
      assert.equal(low.max_priority, "low");
      // Occupy the only slot, then queue a normal request before a "high" one
      // from the low-ceiling key: the normal one must go first.
      const busy = post(relay, normal.key);
      const r0 = await w.next("request");
      const n = post(relay, normal.key, {}, undefined, chatBody("m1"));
      await waitFor(
        "normal queued",
        () => relay.runtime.state.queues.get("local")!.length === 1,
      );
      const h = post(relay, low.key, { "x-priority": "high" });
      await waitFor(
        "claimed-high queued",
        () => relay.runtime.state.queues.get("local")!.length === 2,
      );
      const queued = [...relay.runtime.state.requests.values()]
        .filter((r) => r.tenant === "batch");
      assert.equal(queued.length, 1);
      assert.equal(queued[0]!.priority, "low");
      w.complete(r0, 200, "{}");
      const next = await w.next("request");
      assert.equal(
        (next.headers as Record<string, string>)["x-tenant-id"],
        "app",
      );
      w.complete(next, 200, "{}");
      const last = await w.next("request");
      const h2 = last.headers as Record<string, string>;
      assert.equal(h2["x-tenant-id"], "batch");
      assert.equal(
        h2["x-priority"],
        "low",
        "the backend sees the applied class",
      );
      w.complete(last, 200, "{}");
      for (const r of [busy, n, h]) assert.equal(await (await r).text(), "{}");
    },
  );
});

Deno.test("POST /admin/keys validates tenant and max_priority, lists them, and stores them across restarts", async () => {
  await withTempDir(async (dir) => {
    const dbPath = `${dir}/relay.db`;
    let relay = await keyRelay({}, dbPath);
    try {
      for (
        const bad of [
          { name: "x", tenant: "has space" },
          { name: "x", tenant: "" },
          { name: "x", tenant: 5 },
          { name: "x", max_priority: "urgent" },
        ]
      ) {
        const res = await admin(relay, "/admin/keys", {
          method: "POST",
          body: JSON.stringify(bad),
        });
        assert.equal(res.status, 400, JSON.stringify(bad));
        assert.equal((await res.json()).error.code, "invalid_scope");
      }
      await createKey(relay, {
        name: "a",
        tenant: "t.a:1",
        max_priority: "high",
      });
      await createKey(relay, { name: "gw" });
    } finally {
      await relay.close();
    }
    relay = await keyRelay({}, dbPath);
    try {
      const list = await (await admin(relay, "/admin/keys")).json();
      assert.deepEqual(
        list.keys.map((k: Record<string, unknown>) => [
          k.name,
          k.tenant,
          k.max_priority,
        ]),
        [["a", "t.a:1", "high"], ["gw", null, "normal"]],
      );
    } finally {
      await relay.close();
    }
  });
});

Deno.test("a version-2 key database migrates: its keys stay, unbound, with ceiling normal", async () => {
  await withTempDir((dir) => {
    const path = `${dir}/old.db`;
    const db = new DatabaseSync(path);
    db.exec(`CREATE TABLE schema_version (version INTEGER);
      INSERT INTO schema_version VALUES (2);
      CREATE TABLE api_keys (id TEXT PRIMARY KEY, name TEXT NOT NULL,
        key_hash TEXT NOT NULL UNIQUE, created_at_ms INTEGER NOT NULL,
        last_used_at_ms INTEGER);
      CREATE TABLE op_nonces (nonce TEXT PRIMARY KEY, expires_at_secs INTEGER NOT NULL);
      INSERT INTO api_keys VALUES ('key_old', 'old', 'h', 1, NULL);`);
    db.close();
    const store = openSqliteKeyStore(path);
    try {
      assert.deepEqual(
        store.list().map((k) => [k.id, k.tenant, k.maxPriority]),
        [
          ["key_old", null, "normal"],
        ],
      );
    } finally {
      store.close();
    }
    const check = new DatabaseSync(path, { readOnly: true });
    const v = check.prepare("SELECT version FROM schema_version").get();
    check.close();
    assert.equal(Number(v?.version), SCHEMA_VERSION);
  });
});

Deno.test("issue 24.3 keys safe by default: a key created without a tenant is its own tenant: naming teamB is refused, it keeps its own limit, and teamB's key keeps its budget", async () => {
  await withRegisteredWorker(
    keyRelay({
      defaultRateLimit: { limit: 2, windowMs: 60_000 },
    }),
    {},
    async (relay, w) => {
      const plain = await createKey(relay, { name: "app" });
      assert.equal(plain.tenant, null);
      assert.equal(plain.may_name_tenants, false);
      const teamB = await createKey(relay, { name: "b", tenant: "teamB" });
      // The reproduction: two requests as teamB from the tenantless key.
      for (let i = 0; i < 2; i++) {
        const res = await post(relay, plain.key, { "x-tenant-id": "teamB" });
        assert.equal(res.status, 403);
        const body = await res.json();
        assert.equal(body.error.code, "tenant_mismatch");
        assert.match(body.error.message, /may_name_tenants/);
      }
      // teamB's own key still has its whole budget.
      assert.equal(await roundTrip(relay, w, teamB.key), 200);
      assert.equal(await roundTrip(relay, w, teamB.key), 200);
      // The tenantless key has its own limit, named after it, and cannot leave it.
      assert.equal(await roundTrip(relay, w, plain.key), 200);
      assert.equal(await roundTrip(relay, w, plain.key), 200);
      const over = await post(relay, plain.key);
      assert.equal(over.status, 429);
      assert.match((await over.json()).error.message, new RegExp(plain.id));
      const elsewhere = await post(relay, plain.key, {
        "x-tenant-id": "teamC",
      });
      assert.equal(elsewhere.status, 403);
      await elsewhere.body?.cancel();
      // Its own tenant named in the header is accepted (and still limited).
      const own = await post(relay, plain.key, { "x-tenant-id": plain.id });
      assert.equal(own.status, 429);
      await own.body?.cancel();
    },
  );
});

Deno.test("issue 24.3 may_name_tenants is listed with the key, refused beside a tenant, and must be a boolean", async () => {
  const relay = await keyRelay();
  try {
    const gw = await createKey(relay, { name: "gw", may_name_tenants: true });
    const list = await (await admin(relay, "/admin/keys")).json();
    const listed = list.keys.find((k: { id: string }) => k.id === gw.id);
    assert.equal(listed.may_name_tenants, true);
    for (
      const body of [
        { name: "x", tenant: "t", may_name_tenants: true },
        { name: "x", may_name_tenants: "yes" },
      ]
    ) {
      const res = await admin(relay, "/admin/keys", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      assert.equal(res.status, 400);
      await res.body?.cancel();
    }
  } finally {
    await relay.close();
  }
});
