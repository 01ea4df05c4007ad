import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { withTempDir } from "../../with_closing.ts";
import {
  admin,
  ADMIN_TOKEN,
  autoRespond,
  startTestRelay,
  withTestRelay,
} from "../_relay_test_helpers.ts";
import {
  chatBody,
  registeredWorker,
  SECRET,
  testConfig,
} from "../_test_helpers.ts";
import {
  hashKey,
  KeyStoreError,
  openSqliteKeyStore,
  SCHEMA_VERSION,
} from "./api_keys.ts";

const MAIN = new URL("../main.ts", import.meta.url).pathname;

function keyConfig(dbPath = ":memory:") {
  return testConfig({}, {
    adminToken: ADMIN_TOKEN,
    requireApiKeys: true,
    dbPath,
  });
}

async function createKey(
  relay: { url: string },
  name: string,
): Promise<
  & { id: string; key: string; name: string; created_at: number }
  & Record<
    string,
    unknown
  >
> {
  const res = await admin(relay as never, "/admin/keys", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name }),
  });
  assert.equal(res.status, 201);
  return await res.json();
}

function chat(url: string, headers: Record<string, string>) {
  return fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: chatBody(),
  });
}

function messages(url: string, headers: Record<string, string>) {
  return fetch(`${url}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({
      model: "m1",
      max_tokens: 5,
      messages: [{ role: "user", content: "hi" }],
    }),
  });
}

Deno.test("C36 key create -> use -> revoke -> 401, in each route's own error shape", async () => {
  await withTestRelay(keyConfig(), async (relay) => {
    const w = await registeredWorker(relay);
    const stop = autoRespond(w);

    // No key: 401 in the OpenAI shape and in the Anthropic shape.
    const none = await chat(relay.url, {});
    assert.equal(none.status, 401);
    const noneBody = await none.json();
    assert.equal(noneBody.error.type, "authentication_error");
    assert.equal(noneBody.error.code, "missing_api_key");
    const noneAnthropic = await messages(relay.url, {});
    assert.equal(noneAnthropic.status, 401);
    const anthropicBody = await noneAnthropic.json();
    assert.equal(anthropicBody.type, "error");
    assert.equal(anthropicBody.error.type, "authentication_error");

    const created = await createKey(relay, "production-app");
    assert.match(created.key, /^mr-[A-Za-z0-9_-]{32,}$/);
    assert.match(created.id, /^key_/);
    assert.equal(created.name, "production-app");
    // Wall-clock times: they outlive the process. The original's epoch
    // seconds under its name, ours as ISO text beside them (issue 32).
    assert.ok(Number.isInteger(created.created_at));
    assert.ok(
      Math.abs(Number(created.created_at) * 1000 - Date.now()) < 60_000,
    );
    assert.equal(
      Math.floor(Date.parse(String(created.created_at_iso)) / 1000),
      created.created_at,
    );

    const ok = await chat(relay.url, {
      authorization: `Bearer ${created.key}`,
    });
    assert.equal(ok.status, 200);
    await ok.text();
    // x-api-key is accepted on /v1/messages, as Anthropic clients send it.
    const okAnthropic = await messages(relay.url, { "x-api-key": created.key });
    assert.equal(okAnthropic.status, 200);
    await okAnthropic.text();
    // ...but not on the OpenAI routes.
    const xOnOpenAi = await chat(relay.url, { "x-api-key": created.key });
    assert.equal(xOnOpenAi.status, 401);
    await xOnOpenAi.body?.cancel();

    // The relay's key is not forwarded to the worker.
    const forwarded = w.frames.filter((f) => f.type === "request");
    assert.equal(forwarded.length, 2);
    for (const f of forwarded) {
      const h = f.headers as Record<string, string>;
      assert.equal(h.authorization, undefined);
      assert.equal(h["x-api-key"], undefined);
    }

    // Listed without the secret, with its last use.
    const list = await (await admin(relay, "/admin/keys")).json();
    assert.equal(list.keys.length, 1);
    assert.equal(list.keys[0].id, created.id);
    assert.equal(list.keys[0].key, undefined);
    assert.equal(list.keys[0].secret, undefined);
    assert.ok(!JSON.stringify(list).includes(created.key));
    // Only the prefix the original shows, which is the key's start.
    assert.ok(created.key.startsWith(list.keys[0].prefix));
    assert.equal(list.keys[0].prefix.length, 11);
    assert.ok(Number.isInteger(list.keys[0].last_used_at));
    assert.match(list.keys[0].last_used_at_iso, /^\d{4}-/);

    // The original's answer to a revoke: 204, no body.
    const revoked = await admin(relay, `/admin/keys/${created.id}`, {
      method: "DELETE",
    });
    assert.equal(revoked.status, 204);
    assert.equal(await revoked.text(), "");
    const again = await admin(relay, `/admin/keys/${created.id}`, {
      method: "DELETE",
    });
    assert.equal(again.status, 404);
    await again.body?.cancel();

    const after = await chat(relay.url, {
      authorization: `Bearer ${created.key}`,
    });
    assert.equal(after.status, 401);
    assert.equal((await after.json()).error.code, "invalid_api_key");
    const afterAnthropic = await messages(relay.url, {
      "x-api-key": created.key,
    });
    assert.equal(afterAnthropic.status, 401);
    assert.equal((await afterAnthropic.json()).type, "error");
    assert.ok((relay.metrics.authFailures.get("api_key") ?? 0) >= 5);
    stop();
    await w.close();
  });
});

Deno.test("C36 POST /admin/keys needs a name", async () => {
  await withTestRelay(keyConfig(), async (relay) => {
    for (const body of ["", "{}", '{"name":"  "}', "not json"]) {
      const res = await admin(relay, "/admin/keys", { method: "POST", body });
      assert.equal(res.status, 400, body);
      await res.body?.cancel();
    }
  });
});

Deno.test("C36 keys survive a server restart with the same database file, stored only as hashes", async () => {
  await withTempDir(async (dir) => {
    const dbPath = `${dir}/keys.db`;
    const first = await startTestRelay(keyConfig(dbPath));
    let created;
    try {
      created = await createKey(first, "survivor");
      await createKey(first, "other");
    } finally {
      await first.close();
    }

    // On disk: a schema version, and the key only as its SHA-256.
    const db = new DatabaseSync(dbPath, { readOnly: true });
    const version = db.prepare("SELECT version FROM schema_version").get();
    assert.equal(Number(version?.version), SCHEMA_VERSION);
    const rows = db.prepare("SELECT * FROM api_keys").all();
    db.close();
    assert.equal(rows.length, 2);
    assert.ok(rows.some((r) => r.key_hash === hashKey(created.key)));
    const raw = new TextDecoder("latin1").decode(await Deno.readFile(dbPath));
    assert.ok(!raw.includes(created.key), "the key text is not on disk");

    const second = await startTestRelay(keyConfig(dbPath));
    try {
      const w = await registeredWorker(second);
      const stop = autoRespond(w);
      const list = await (await admin(second, "/admin/keys")).json();
      assert.deepEqual(
        list.keys.map((k: { name: string }) => k.name),
        ["survivor", "other"],
      );
      const ok = await chat(second.url, {
        authorization: `Bearer ${created.key}`,
      });
      assert.equal(ok.status, 200);
      await ok.text();
      stop();
      await w.close();
    } finally {
      await second.close();
    }
  });
});

Deno.test("a damaged key database is reported at start (exit 1, one clear line) and left untouched", async () => {
  await withTempDir(async (dir) => {
    const dbPath = `${dir}/modelrelay.db`;
    const garbage = new Uint8Array(8192).map((_, i) => (i * 7919) % 251);
    await Deno.writeFile(dbPath, garbage);
    assert.throws(() => openSqliteKeyStore(dbPath), KeyStoreError);

    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-net",
        "--allow-env",
        "--allow-read",
        "--allow-write",
        MAIN,
      ],
      env: {
        WORKER_SECRET: SECRET,
        LISTEN_ADDR: "127.0.0.1:0",
        MODELRELAY_ADMIN_TOKEN: ADMIN_TOKEN,
        MODELRELAY_REQUIRE_API_KEYS: "true",
        MODELRELAY_DB_PATH: dbPath,
      },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 1);
    assert.match(
      stderr,
      /^modelrelay server: the API key database ".*modelrelay\.db" is unreadable or damaged: .*left untouched/,
    );
    assert.equal(stderr.trim().split("\n").length, 1);
    assert.deepEqual(await Deno.readFile(dbPath), garbage);
    assert.deepEqual(
      [...Deno.readDirSync(dir)].map((e) => e.name),
      ["modelrelay.db"],
    );
  });
});

Deno.test("a foreign SQLite file or a newer schema is refused, never migrated over", async () => {
  await withTempDir((dir) => {
    const foreign = `${dir}/foreign.db`;
    const db = new DatabaseSync(foreign);
    db.exec("CREATE TABLE notes (t TEXT)");
    db.close();
    assert.throws(
      () => openSqliteKeyStore(foreign),
      /not a ModelRelay key database/,
    );
    const newer = `${dir}/newer.db`;
    const store = openSqliteKeyStore(newer);
    store.close();
    const db2 = new DatabaseSync(newer);
    db2.exec(`UPDATE schema_version SET version = ${SCHEMA_VERSION + 1}`);
    db2.close();
    assert.throws(() => openSqliteKeyStore(newer), /newer than this build/);
    assert.throws(
      () => openSqliteKeyStore(`${dir}/no/such/dir/keys.db`),
      /cannot open the API key database/,
    );
  });
});

Deno.test("last-used times are written at most once a minute per key", () => {
  const store = openSqliteKeyStore(":memory:");
  try {
    const k = store.create("k", 1_000);
    const id = store.verify(k.key)?.id;
    assert.equal(id, k.id);
    assert.equal(store.verify("mr-nope"), null);
    assert.equal(store.verify("sk-nope"), null);
    store.touch(k.id, 2_000);
    store.touch(k.id, 30_000);
    assert.equal(store.list()[0]!.lastUsedAtMs, 2_000);
    store.touch(k.id, 62_000);
    assert.equal(store.list()[0]!.lastUsedAtMs, 62_000);
    assert.equal(store.revoke(k.id), true);
    assert.equal(store.verify(k.key), null);
  } finally {
    store.close();
  }
});

Deno.test("without MODELRELAY_REQUIRE_API_KEYS inference needs no key", async () => {
  await withTestRelay(
    testConfig({}, { adminToken: ADMIN_TOKEN }),
    async (relay) => {
      const w = await registeredWorker(relay);
      const stop = autoRespond(w);
      const res = await chat(relay.url, {});
      assert.equal(res.status, 200);
      await res.text();
      assert.equal(relay.metrics.authFailures.size, 0);
      stop();
      await w.close();
    },
  );
});

Deno.test("the key database is created 0600, and an older wider file is narrowed", async () => {
  if (Deno.build.os === "windows") return;
  await withTempDir((dir) => {
    const path = `${dir}/relay.db`;
    const store = openSqliteKeyStore(path);
    store.create("k", 1);
    store.close();
    assert.equal(Deno.statSync(path).mode! & 0o777, 0o600);
    // Any journal SQLite left beside it has the database's mode too.
    for (const e of Deno.readDirSync(dir)) {
      assert.equal(Deno.statSync(`${dir}/${e.name}`).mode! & 0o077, 0, e.name);
    }
    Deno.chmodSync(path, 0o644);
    openSqliteKeyStore(path).close();
    assert.equal(Deno.statSync(path).mode! & 0o777, 0o600);
  });
});

Deno.test("a key database of schema 2 is migrated: its keys stay valid, unbound, and list with a null prefix", async () => {
  await withTempDir((dir) => {
    const path = `${dir}/v2.db`;
    const db = new DatabaseSync(path);
    db.exec("CREATE TABLE schema_version (version INTEGER)");
    db.exec("INSERT INTO schema_version (version) VALUES (2)");
    db.exec(`CREATE TABLE api_keys (
       id TEXT PRIMARY KEY,
       name TEXT NOT NULL,
       key_hash TEXT NOT NULL UNIQUE,
       created_at_ms INTEGER NOT NULL,
       last_used_at_ms INTEGER
     )`);
    db.exec(
      "CREATE TABLE op_nonces (nonce TEXT PRIMARY KEY, expires_at_secs INTEGER NOT NULL)",
    );
    db.prepare(
      "INSERT INTO api_keys (id, name, key_hash, created_at_ms) VALUES (?, ?, ?, ?)",
    ).run("key_old", "old", hashKey("mr-old-key"), 1_000);
    db.close();
    const notes: [string, Record<string, string | number>][] = [];
    const store = openSqliteKeyStore(path, (m, f) => notes.push([m, f]));
    try {
      // Issue 24: the old tenantless key no longer names tenants, and the
      // upgrade says so once.
      assert.deepEqual(store.verify("mr-old-key"), {
        id: "key_old",
        name: "old",
        tenant: null,
        maxPriority: "normal",
        mayNameTenants: false,
        // Issue 26: an older key has no limits of its own.
        limits: { rateLimit: null, tokenRateLimit: null, tokenBudget: null },
      });
      assert.equal(notes.length, 1);
      assert.match(notes[0]![0], /their own tenant/);
      assert.deepEqual(notes[0]![1], { keys: 1 });
      const fresh = store.create("new", 2_000);
      assert.deepEqual(store.list().map((k) => [k.id, k.prefix]), [
        ["key_old", null],
        [fresh.id, fresh.key.slice(0, 11)],
      ]);
    } finally {
      store.close();
    }
  });
});
