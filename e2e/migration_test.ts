// Issue 32: a user of the Rust original moves over, unchanged: the server's
// command line verbatim, the worker's wizard-written TOML file, a worker that
// authenticates as the original's does (?worker_secret=), the original's admin
// shapes field by field, and chat through the openai SDK. Real processes.
import assert from "node:assert/strict";
import OpenAI from "openai";
import {
  PERMISSIONS,
  RELAY_ENV,
  startMockProcess,
} from "../shell/demo/cluster.ts";
import { type Child, spawnChild, waitUntil } from "../shell/procs.ts";
import { answerWords, MODEL } from "./_cluster.ts";
import { openaiAt, streamedText } from "./_sdk.ts";
import { postChat } from "./_post_chat.ts";
import { originalServerArgs } from "../shell/server/_original_args.ts";

const SECRET = "migration-secret-0123456789";
const ADMIN = "migration-admin-token";
const RAW_MODEL = "raw-model";

/** A worker of the original's dialect, by hand: the secret only in ?worker_secret=. */
async function rawWorker(serverUrl: string): Promise<WebSocket> {
  const url = `${
    serverUrl.replace("http://", "ws://")
  }/v1/worker/connect?provider=local&worker_secret=${
    encodeURIComponent(SECRET)
  }`;
  const ws = new WebSocket(url);
  const acked = new Promise<void>((resolve, reject) => {
    ws.onerror = () => reject(new Error("raw worker socket failed"));
    ws.onclose = (e) =>
      reject(new Error(`raw worker closed ${e.code} ${e.reason}`));
    ws.onmessage = (e) => {
      const f = JSON.parse(e.data as string);
      if (f.type === "register_ack") return resolve();
      if (f.type === "ping") {
        ws.send(JSON.stringify({ type: "pong", timestamp: f.timestamp }));
      }
      if (f.type !== "request") return;
      ws.send(JSON.stringify({
        type: "response_complete",
        request_id: f.request_id,
        status_code: 200,
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          id: "raw-1",
          object: "chat.completion",
          created: 0,
          model: RAW_MODEL,
          choices: [{
            index: 0,
            finish_reason: "stop",
            message: { role: "assistant", content: "raw hello" },
          }],
        }),
      }));
    };
  });
  ws.onopen = () =>
    ws.send(JSON.stringify({
      type: "register",
      worker_name: "raw-original",
      models: [RAW_MODEL],
      max_concurrent: 2,
      protocol_version: "2026-04-bridge-v1",
    }));
  await acked;
  ws.onclose = null;
  return ws;
}

async function adminGet(
  serverUrl: string,
  path: string,
): Promise<Record<string, unknown>> {
  // A bare token, as the original accepts it (no "Bearer ").
  const res = await fetch(`${serverUrl}${path}`, {
    headers: { authorization: ADMIN },
  });
  assert.equal(res.status, 200, `${path}: ${res.status}`);
  return await res.json();
}

Deno.test("migration: the original's server flags, worker TOML, ?worker_secret=, admin shapes and the SDK work unchanged", async () => {
  const dir = await Deno.makeTempDir({ prefix: "migration-" });
  const children: Child[] = [];
  let raw: WebSocket | null = null;
  try {
    const mock = await startMockProcess({ delayMs: 1, models: [MODEL] });
    children.push(mock.child);

    const server = spawnChild({
      name: "server",
      script: "shell/server/main.ts",
      permissions: [...PERMISSIONS.server],
      args: originalServerArgs("127.0.0.1:0", SECRET, ADMIN),
      env: { MODELRELAY_DB_PATH: `${dir}/keys.db` },
      unsetEnv: RELAY_ENV,
    });
    children.push(server);
    const listening = await server.waitForLine(
      /server listening address=(\S+) .*queue_timeout=none request_timeout=none max_queue_len=unlimited/,
    );
    const serverUrl = `http://${listening[1]}`;

    // The setup wizard's file, every key it knows; models = ["*"] discovers.
    const toml = [
      "# written by the original's setup wizard",
      `proxy_url = "${serverUrl}"`,
      'provider = "local"',
      `worker_secret = "${SECRET}"`,
      'worker_name = "gpu-box-1"',
      'models = ["*"]',
      "max_concurrency = 3",
      `backend_url = "${mock.url}"`,
      'log_level = "info"',
    ].join("\n");
    await Deno.writeTextFile(`${dir}/worker.toml`, toml);
    const worker = spawnChild({
      name: "worker",
      script: "shell/worker/main.ts",
      permissions: [...PERMISSIONS.worker],
      args: ["--config", `${dir}/worker.toml`],
      unsetEnv: RELAY_ENV,
    });
    children.push(worker);
    await worker.waitForLine(/worker: registered /);
    assert.ok(
      worker.lines.some((l) => /models_source=discovered/.test(l)),
      worker.tail(),
    );

    raw = await rawWorker(serverUrl);

    // /admin/workers: the original's fields, with the file's values.
    const workers = (await adminGet(serverUrl, "/admin/workers"))
      .workers as Record<string, unknown>[];
    assert.equal(workers.length, 2);
    const byName = new Map(workers.map((w) => [w.worker_name, w]));
    const box = byName.get("gpu-box-1")!;
    assert.equal(typeof box.worker_id, "string");
    assert.equal(box.provider, "local");
    assert.deepEqual(box.models, [MODEL]);
    assert.equal(box.max_concurrent, 3);
    assert.equal(box.reported_load, 0);
    assert.equal(box.in_flight_count, 0);
    assert.equal(box.is_draining, false);
    const rawView = byName.get("raw-original")!;
    assert.deepEqual(rawView.models, [RAW_MODEL]);
    assert.equal(rawView.max_concurrent, 2);

    // /admin/stats: queue depth by provider, active workers.
    const stats = await adminGet(serverUrl, "/admin/stats");
    assert.deepEqual(stats.queue_depth, { local: 0 });
    assert.equal(stats.active_workers, 2);

    // POST /admin/keys: 201, the original's fields and types.
    const created = await fetch(`${serverUrl}/admin/keys`, {
      method: "POST",
      headers: { authorization: ADMIN, "content-type": "application/json" },
      body: JSON.stringify({ name: "production-app" }),
    });
    assert.equal(created.status, 201);
    const key = await created.json();
    assert.equal(typeof key.id, "string");
    assert.equal(key.name, "production-app");
    assert.ok(Number.isInteger(key.created_at), "created_at: epoch seconds");
    assert.ok(Math.abs(key.created_at - Date.now() / 1000) < 600);
    assert.equal(key.last_used_at, null);
    assert.equal(key.revoked, false);
    assert.match(key.secret, /^mr-/);
    assert.ok(key.secret.startsWith(key.prefix));

    // --require-api-keys (bare) took: no key, no answer.
    const noKey = await postChat(serverUrl, { model: MODEL, messages: [] });
    assert.equal(noKey.status, 401);
    await noKey.body?.cancel();

    const client = openaiAt(serverUrl, { apiKey: key.secret });
    const whole = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Hello!" }],
      max_tokens: 5,
    });
    assert.equal(whole.choices[0]?.message.content, answerWords(5));
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Hello!" }],
      max_tokens: 7,
      stream: true,
    });
    assert.equal(await streamedText(stream), answerWords(7));
    const viaRaw = await client.chat.completions.create({
      model: RAW_MODEL,
      messages: [{ role: "user", content: "Hello!" }],
    });
    assert.equal(viaRaw.choices[0]?.message.content, "raw hello");

    // GET /admin/keys: the same fields, last use as epoch seconds.
    const listed = (await adminGet(serverUrl, "/admin/keys"))
      .keys as Record<string, unknown>[];
    assert.equal(listed.length, 1);
    const entry = listed[0]!;
    assert.equal(entry.id, key.id);
    assert.equal(entry.name, "production-app");
    assert.equal(entry.prefix, key.prefix);
    assert.equal(entry.created_at, key.created_at);
    assert.ok(Number.isInteger(entry.last_used_at), "last_used_at: seconds");
    assert.equal(entry.revoked, false);
    assert.equal(entry.secret, undefined);

    // DELETE /admin/keys/{id}: 204, then 404; the key stops working.
    const del = (id: string) =>
      fetch(`${serverUrl}/admin/keys/${id}`, {
        method: "DELETE",
        headers: { authorization: ADMIN },
      });
    const gone = await del(key.id);
    assert.equal(gone.status, 204);
    assert.equal(await gone.text(), "");
    const again = await del(key.id);
    assert.equal(again.status, 404);
    await again.body?.cancel();
    await assert.rejects(
      client.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "Hello!" }],
      }),
      (e) => e instanceof OpenAI.AuthenticationError,
    );
  } finally {
    raw?.close();
    for (const c of children.reverse()) await c.stop(5_000);
    await Deno.remove(dir, { recursive: true });
  }
  await waitUntil("children gone", () => children.every((c) => c.exited));
});
