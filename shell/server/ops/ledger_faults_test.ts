// Issue 33 (MEDIUM 5): the usage ledger's file refusing writes — locked by
// another connection, or on a full disk — costs no record: real server, worker
// and mock processes, a real SQLite lock, a real full file system.
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import {
  startMockProcess,
  startServerProcess,
  startWorkerProcess,
} from "../../demo/cluster.ts";
import { type Child, waitUntil } from "../../procs.ts";
import { openRelayDatabase } from "./api_keys.ts";
import { type Finished, openUsageLedger, PENDING_MAX } from "./usage_ledger.ts";

const SECRET = "ledger-faults-secret";
const ADMIN = "ledger-faults-admin-token";

type Relay = { url: string; server: Child; stop(): Promise<void> };

async function startRelay(dbPath: string): Promise<Relay> {
  const mock = await startMockProcess({ delayMs: 0 });
  const server = await startServerProcess({
    secret: SECRET,
    adminToken: ADMIN,
    env: { MODELRELAY_DB_PATH: dbPath },
  });
  const worker = await startWorkerProcess({
    name: "w1",
    serverUrl: server.url,
    secret: SECRET,
    backendUrl: mock.url,
  });
  return {
    url: server.url,
    server: server.child,
    async stop() {
      await worker.stop(3_000);
      await server.child.stop(3_000);
      await mock.child.stop(3_000);
    },
  };
}

/** `n` requests, every other one streamed; each must be answered whole. */
async function sendRequests(url: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const stream = i % 2 === 0;
    const r = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "mock-model",
        stream,
        messages: [{ role: "user", content: `hello ${i}` }],
      }),
    });
    const text = await r.text();
    assert.equal(r.status, 200, text);
    if (stream) assert.match(text, /data: \[DONE\]/);
  }
}

async function recordCount(url: string): Promise<number> {
  const r = await fetch(`${url}/admin/requests?limit=500`, {
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  return (await r.json()).requests.length;
}

Deno.test("issue 33 a write lock held by another connection loses no usage record: the relay goes on, the records are written once the lock goes", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ledger-lock-" });
  const dbPath = `${dir}/relay.db`;
  const relay = await startRelay(dbPath);
  const other = new DatabaseSync(dbPath);
  try {
    // As a sqlite3 session or a backup would: the write lock, held.
    other.exec("BEGIN IMMEDIATE");
    const n = 30;
    await sendRequests(relay.url, n);
    await waitUntil(
      "the refused write to be logged",
      () =>
        /usage records not written.*database is locked/.test(
          relay.server.tail(200),
        ),
    );
    // Reads still answer while the lock is held (write-ahead log).
    assert.equal(await recordCount(relay.url), 0);
    other.exec("COMMIT");
    await waitUntil(
      "every record written",
      async () => await recordCount(relay.url) === n,
    );
    assert.match(relay.server.tail(200), /usage records written again/);
  } finally {
    if (other.isTransaction) other.exec("ROLLBACK");
    other.close();
    await relay.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

async function run(cmd: string, args: string[]): Promise<void> {
  const out = await new Deno.Command(cmd, { args, stderr: "piped" }).output();
  if (!out.success) {
    throw new Error(
      `${cmd} ${args.join(" ")}: ${
        new TextDecoder().decode(out.stderr)
      } (this test mounts a small tmpfs: run it as root)`,
    );
  }
}

/** Writes `path` until the file system is full; returns the bytes written. */
async function fill(path: string): Promise<number> {
  const file = await Deno.open(path, { write: true, create: true });
  const chunk = new Uint8Array(64 * 1024);
  let written = 0;
  try {
    for (;;) written += await file.write(chunk);
  } catch {
    // ENOSPC: full
  } finally {
    file.close();
  }
  return written;
}

Deno.test("issue 33 on a full disk usage records are kept, the original error logged, and written when space returns", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ledger-full-" });
  await run("mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", dir]);
  let relay: Relay | null = null;
  try {
    relay = await startRelay(`${dir}/relay.db`);
    assert.ok(await fill(`${dir}/filler`) > 0);
    const n = 30;
    await sendRequests(relay.url, n);
    const server = relay.server;
    await waitUntil(
      "the refused write to be logged",
      () => /usage records not written/.test(server.tail(200)),
    );
    assert.match(server.tail(200), /disk I\/O error|database or disk is full/);
    assert.doesNotMatch(server.tail(200), /cannot rollback/);
    await Deno.remove(`${dir}/filler`);
    await waitUntil(
      "every record written",
      async () => await recordCount(relay!.url) === n,
    );
  } finally {
    await relay?.stop();
    await run("umount", [dir]);
    await Deno.remove(dir, { recursive: true });
  }
});

function finished(requestId: string): Finished {
  return {
    kind: "requestFinished",
    requestId,
    route: "/v1/chat/completions",
    model: "m",
    tenant: "t",
    outcome: "completed",
    status: 200,
    durationMs: 5,
    queueWaitMs: 0,
    firstByteMs: 1,
    requeues: 0,
    cacheReport: null,
    keyId: null,
    keyName: null,
    modelAsked: "m",
    modelServed: "m",
    workerName: "w",
    usage: { prompt: 1, completion: 2, cached: null, estimated: false },
  };
}

Deno.test("issue 33 while the file refuses writes at most PENDING_MAX records wait: the oldest are dropped and counted, the rest written after", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ledger-bound-" });
  const db = openRelayDatabase(`${dir}/relay.db`);
  const errors: unknown[] = [];
  let dropped = 0;
  const ledger = openUsageLedger(db, 30, (e) => errors.push(e), {
    dropped: (n) => dropped += n,
  });
  const other = new DatabaseSync(`${dir}/relay.db`);
  try {
    other.exec("BEGIN IMMEDIATE");
    for (let i = 0; i < PENDING_MAX + 25; i++) {
      ledger.record(finished(`r${i}`), 1_000 + i);
    }
    ledger.flush();
    assert.equal(dropped, 25);
    assert.equal(errors.length, 1);
    assert.match(String(errors[0]), /database is locked/);
    other.exec("COMMIT");
    ledger.close();
    const rows = db.prepare("SELECT COUNT(*) AS n FROM usage_records").get()!;
    assert.equal(Number(rows.n), PENDING_MAX);
    const oldest = db.prepare(
      "SELECT request_id FROM usage_records ORDER BY id LIMIT 1",
    ).get()!;
    assert.equal(oldest.request_id, "r25");
  } finally {
    if (other.isTransaction) other.exec("ROLLBACK");
    other.close();
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
});
