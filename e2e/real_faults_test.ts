// Issue 14, "real backends and real faults": failures seen on main whose fix is
// in the worker or the server shell, replayed with real processes (server,
// workers, the mock backend in its fault modes) and named after what went
// wrong. Failures fixed in the server core: real_faults_core_test.ts.
import assert from "node:assert/strict";
import { workersConnected } from "../shell/demo/relay_probes.ts";
import { waitUntil } from "../shell/procs.ts";
import { startServerProcess } from "../shell/demo/cluster.ts";
import {
  chat,
  faultTest,
  rssMiB,
  SECRET,
  startMock,
  startServer,
  startWorker,
} from "./_faults.ts";
import { postChat } from "./_post_chat.ts";

faultTest(
  "issue 14.5: /health answers 200 with no worker connected, and says so in the body",
  async (started) => {
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
  },
);

faultTest(
  "issue 14.6: POST /admin/keys returns the original's fields, the new key as `secret`",
  async (started) => {
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
      postChat(server.url, { model: "m", messages: [] }, {
        headers: { authorization: `Bearer ${key}` },
      }).then(async (r) => {
        await r.body?.cancel();
        return r.status;
      });
    assert.equal(await ask("mr-wrong"), 401);
    assert.equal(await ask(created.secret), 504);
  },
);

faultTest(
  "issue 14.7: a worker survives a server restart: it reconnects to the new server instead of exiting",
  async (started) => {
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
  },
);

faultTest(
  "issue 14.10: a worker reaches a backend that needs its own key (BACKEND_API_KEY), and never logs the key",
  async (started) => {
    const key = "sk-backend-e2e-7f3a";
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
  },
);

faultTest(
  "issue 14.4: a backend that dies mid-stream ends the SSE stream with an error event, no JSON spliced into it",
  async (started) => {
    const mock = await startMock(started);
    const server = await startServer(started);
    await startWorker(started, "dies", server, mock.url);
    const r = await chat(server, {
      stream: true,
      max_tokens: 10,
      mock_fault: "die",
      mock_fault_after: 2,
    });
    assert.equal(r.status, 200);
    // Every event is a whole `data: <json>` event; the last one is the error.
    const events = r.text.split("\n\n").filter((e) => e.trim() !== "");
    const payloads = events.map((e) => {
      assert.match(e, /^data: /, `not an SSE data event: ${e}`);
      return JSON.parse(e.slice("data: ".length));
    });
    assert.match(r.text, /"content":"quick "/);
    assert.doesNotMatch(r.text, /\[DONE\]/);
    const last = payloads.at(-1);
    assert.ok(
      last?.error !== undefined,
      `no error event at the end: ${r.text}`,
    );
    assert.equal(last.error.code, "backend_stream_broken");
  },
);

faultTest(
  "issue 14.11: a backend answering far more than the relay carries does not exhaust the worker's memory",
  async (started) => {
    const mock = await startMock(started);
    const server = await startServer(started, {
      MAX_RESPONSE_BODY_BYTES: String(32 * 1024 * 1024),
    });
    const worker = await startWorker(started, "bounded", server, mock.url);
    const before = await rssMiB(worker.pid);
    let peak = before;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        peak = Math.max(peak, await rssMiB(worker.pid));
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    // 512 Mi characters: buffered whole, this was over 1 GiB of worker memory.
    const r = await chat(server, { mock_body_chars: 512 * 1024 * 1024 });
    sampling = false;
    await sampler;
    assert.equal(r.status, 502, r.text.slice(0, 300));
    assert.equal(JSON.parse(r.text).error.code, "response_too_large");
    assert.ok(
      peak - before < 160,
      `worker memory grew by ${Math.round(peak - before)} MiB`,
    );
    // The backend was told to stop, and the worker is still serving.
    await waitUntil(
      "the backend to see the abort",
      async () => (await mock.stats()).aborted >= 1,
    );
    assert.equal((await chat(server, { max_tokens: 2 })).status, 200);
  },
);
