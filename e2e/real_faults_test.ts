// Issue 14, "real backends and real faults": each failure seen on main, replayed
// with real processes (server, workers, the mock backend in its fault modes) and
// named after what went wrong.
import assert from "node:assert/strict";
import type { MockBackendStats } from "../mock/backend.ts";
import {
  type Child,
  waitUntil,
  workersConnected,
} from "../shell/demo/children.ts";
import {
  startMockProcess,
  startServerProcess,
  startWorkerProcess,
} from "../shell/demo/cluster.ts";

const SECRET = "e2e-faults";
const MODEL = "mock-model";

type Mock = { url: string; stats(): Promise<MockBackendStats> };

async function startMock(
  started: Child[],
  opts: { delayMs?: number; args?: string[] } = {},
): Promise<Mock> {
  const mock = await startMockProcess({
    script: "e2e/_mock_with_stats.ts",
    delayMs: opts.delayMs ?? 10,
    models: [MODEL],
    args: opts.args ?? [],
  });
  started.push(mock.child);
  const statsUrl = (await mock.child.waitForLine(/stats on (\S+)/))[1]!;
  return {
    url: mock.url,
    stats: async () => await (await fetch(statsUrl)).json(),
  };
}

async function startServer(
  started: Child[],
  env: Record<string, string> = {},
  port = 0,
): Promise<string> {
  const server = await startServerProcess({
    secret: SECRET,
    port,
    env: { TICK_MS: "20", ...env },
  });
  started.push(server.child);
  return server.url;
}

async function startWorker(
  started: Child[],
  name: string,
  serverUrl: string,
  backendUrl: string,
  env: Record<string, string> = {},
): Promise<Child> {
  const child = await startWorkerProcess({
    name,
    serverUrl,
    secret: SECRET,
    backendUrl,
    env: { LOG_LEVEL: "debug", ...env },
  });
  started.push(child);
  return child;
}

/** POST /v1/chat/completions; the status and the whole body as text. */
async function chat(
  serverUrl: string,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await fetch(`${serverUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: "user", content: "Hello!" }],
      ...body,
    }),
  });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/** Stops every child, last started first, whatever the test did. */
async function withChildren(
  body: (started: Child[]) => Promise<void>,
): Promise<void> {
  const started: Child[] = [];
  try {
    await body(started);
  } finally {
    for (const c of started.reverse()) await c.stop(5_000);
  }
}

Deno.test("issue 14.5: /health answers 200 with no worker connected, and says so in the body", async () => {
  await withChildren(async (started) => {
    const server = await startServerProcess({ secret: SECRET });
    started.push(server.child);
    const res = await fetch(`${server.url}/health`);
    const body = await res.json();
    assert.equal(res.status, 200);
    assert.equal(body.status, "ok");
    assert.equal(body.workers_connected, 0);
    assert.equal(body.workers_routable, 0);
    assert.deepEqual(body.warnings, ["no worker connected"]);
    // Shutting down is still 503: a stopping relay must leave the load balancer.
    server.child.kill("SIGTERM");
    await waitUntil("health 503 or the server gone", async () => {
      try {
        return (await fetch(`${server.url}/health`)).status === 503;
      } catch {
        return server.child.exited !== null;
      }
    });
  });
});

Deno.test("issue 14.6: POST /admin/keys returns the original's fields, the new key as `secret`", async () => {
  await withChildren(async (started) => {
    const server = await startServerProcess({
      secret: SECRET,
      adminToken: "e2e-admin",
      env: { MODELRELAY_REQUIRE_API_KEYS: "true", QUEUE_TIMEOUT_SECS: "1" },
    });
    started.push(server.child);
    const res = await fetch(`${server.url}/admin/keys`, {
      method: "POST",
      headers: {
        authorization: "Bearer e2e-admin",
        "content-type": "application/json",
      },
      body: JSON.stringify({ name: "production-app" }),
    });
    const created = await res.json();
    assert.equal(res.status, 201);
    for (
      const field of [
        "id",
        "name",
        "prefix",
        "created_at",
        "last_used_at",
        "revoked",
        "secret",
      ]
    ) {
      assert.ok(
        field in created,
        `no "${field}" in ${JSON.stringify(created)}`,
      );
    }
    assert.equal(created.name, "production-app");
    assert.equal(created.revoked, false);
    assert.equal(created.last_used_at, null);
    assert.match(created.secret, /^mr-/);
    assert.ok(created.secret.startsWith(created.prefix));
    // The secret is the key clients send: with it a request passes the key
    // check and waits for a worker (504 after 1 s) instead of a 401.
    const ask = (key: string) =>
      fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
        },
        body: JSON.stringify({ model: "m", messages: [] }),
      }).then(async (r) => {
        await r.body?.cancel();
        return r.status;
      });
    assert.equal(await ask("mr-wrong"), 401);
    assert.equal(await ask(created.secret), 504);
  });
});

Deno.test("issue 14.7: a worker survives a server restart: it reconnects to the new server instead of exiting", async () => {
  await withChildren(async (started) => {
    const mock = await startMock(started);
    const first = await startServer(started);
    const port = Number(new URL(first).port);
    const worker = await startWorker(started, "survivor", first, mock.url);
    // The old server drains: graceful_shutdown to the worker, then it closes.
    const old = started.find((c) => c.name === "server")!;
    old.kill("SIGTERM");
    await old.status;
    const second = await startServer(started, {}, port);
    await waitUntil(
      "the worker to register with the new server",
      async () => (await workersConnected(second)) === 1,
      20_000,
    );
    assert.equal(worker.exited, null, worker.lines.join("\n"));
    const r = await chat(second, { max_tokens: 3 });
    assert.equal(r.status, 200, r.text);
  });
});

Deno.test("issue 14.10: a worker reaches a backend that needs its own key (BACKEND_API_KEY), and never logs the key", async () => {
  const key = "sk-backend-e2e-7f3a";
  await withChildren(async (started) => {
    const mock = await startMock(started, { args: ["--api-key", key] });
    const server = await startServer(started);
    // MODELS unset: discovery needs the key as well.
    const worker = await startWorker(started, "keyed", server, mock.url, {
      BACKEND_API_KEY: key,
    });
    // The client's own Authorization (meant for the relay) is replaced.
    const r = await chat(server, { max_tokens: 3 }, {
      authorization: "Bearer client-key",
    });
    assert.equal(r.status, 200, r.text);
    const stream = await chat(server, { max_tokens: 3, stream: true });
    assert.equal(stream.status, 200, stream.text);
    assert.match(stream.text, /\[DONE\]/);
    assert.equal((await mock.stats()).unauthorized, 0);
    assert.ok(worker.lines.some((l) => l.includes("backend_key=set")));
    assert.ok(!worker.lines.some((l) => l.includes(key)), "key in the log");
  });
});
