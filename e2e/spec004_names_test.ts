// Issue 32: spec 004's names on a real server process: its environment
// variables (MAX_QUEUE_DEPTH, QUEUE_TIMEOUT_MS, ENABLE_METRICS, METRICS_PORT,
// ENABLE_MULTI_TENANT, LOG_FORMAT=json), an op token in the compact
// header.payload.signature form, and /health's fields.
import assert from "node:assert/strict";
import { PERMISSIONS, RELAY_ENV } from "../shell/demo/cluster.ts";
import { spawnChild, waitFor } from "../shell/procs.ts";
import { encodeCompactOpToken } from "../shell/server/ops/op_token.ts";

/** The e2e op-token key (committed on purpose: it guards nothing). */
const KEY_PATH = new URL("./_op_token_test.key", import.meta.url).pathname;

const SECRET = "spec004-secret-0123456789";

/** A worker that speaks lifecycle-v1 and hands each lifecycle_request to `seen`. */
async function lifecycleWorker(
  serverUrl: string,
  seen: (frame: Record<string, unknown>) => void,
): Promise<WebSocket> {
  const ws = new WebSocket(
    `${serverUrl.replace("http://", "ws://")}/v1/worker/connect?provider=local`,
    { headers: { "x-worker-secret": SECRET } } as unknown as string[],
  );
  await new Promise<void>((resolve, reject) => {
    ws.onerror = () => reject(new Error("worker socket failed"));
    ws.onmessage = (e) => {
      const f = JSON.parse(e.data as string);
      if (f.type === "register_ack") resolve();
      if (f.type === "lifecycle_request") seen(f);
    };
    ws.onopen = () =>
      ws.send(JSON.stringify({
        type: "register",
        worker_name: "runner",
        models: ["small"],
        max_concurrent: 1,
        protocol_version: "2026-04-bridge-v1",
        extensions: ["capabilities-v1", "lifecycle-v1"],
      }));
  });
  return ws;
}

Deno.test("spec 004: the environment names, a compact op token, /health's fields and METRICS_PORT on a real server", async () => {
  const server = spawnChild({
    name: "server",
    script: "shell/server/main.ts",
    permissions: [...PERMISSIONS.server],
    env: {
      LISTEN_ADDR: "127.0.0.1:0",
      WORKER_SECRET: SECRET,
      MODELRELAY_DB_PATH: ":memory:",
      MAX_QUEUE_DEPTH: "16",
      QUEUE_TIMEOUT_MS: "45000",
      ENABLE_METRICS: "true",
      METRICS_PORT: "0",
      ENABLE_MULTI_TENANT: "true",
      LOG_FORMAT: "json",
      LOG_LEVEL: "info",
      DEFAULT_RATE_LIMIT: "100req/min",
      VERIFIED_OP_TOKEN_KEY_PATH: KEY_PATH,
      OP_TOKEN_SIGNERS: "admin1,admin2,admin3",
      OP_TOKEN_MIN_SIGNERS: "2",
    },
    unsetEnv: RELAY_ENV,
  });
  let ws: WebSocket | null = null;
  try {
    // LOG_FORMAT=json: the start lines are JSON objects.
    const main = JSON.parse(
      (await server.waitForLine(/^\{.*"message":"server listening".*\}$/))[0],
    );
    assert.equal(main.queue_timeout, "45s");
    assert.equal(main.max_queue_len, "16");
    const side = JSON.parse(
      (await server.waitForLine(/^\{.*"message":"metrics listening".*\}$/))[0],
    );
    const serverUrl = `http://${main.address}`;
    assert.notEqual(side.address, main.address);

    const frames: Record<string, unknown>[] = [];
    ws = await lifecycleWorker(serverUrl, (f) => frames.push(f));

    const health = await fetch(`${serverUrl}/health`);
    assert.equal(health.status, 200);
    const h = await health.json();
    assert.equal(h.status, "ok");
    assert.equal(h.health, "healthy");
    assert.equal(typeof h.uptime, "number");
    assert.equal(h.modelsLoaded, 1);
    assert.equal(h.queueDepth, 0);

    const caps = await (await fetch(`${serverUrl}/v1/capabilities`)).json();
    assert.equal(caps.queue.maxDepth, 16);
    assert.equal(caps.capabilities.multiTenant, true);

    const metrics = await fetch(`http://${side.address}/metrics`);
    assert.equal(metrics.status, 200);
    assert.match(await metrics.text(), /^modelrelay_workers_connected 1$/m);

    // The compact form, signed as JWS HS256 with the key file's bytes.
    const key = (await Deno.readFile(KEY_PATH)).filter((b) =>
      b !== 0x0a && b !== 0x0d
    );
    const token = encodeCompactOpToken({
      operation: "model-load",
      modelId: "big",
      issuedAt: Math.floor(Date.now() / 1000),
      signers: ["admin1", "admin3"],
      nonce: `spec004-${crypto.randomUUID()}`,
    }, key);
    assert.match(token, /^[\w-]+\.[\w-]+\.[\w-]+$/);
    const load = await fetch(`${serverUrl}/v1/models/load`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ modelId: "big", verifiedOpToken: token }),
    });
    const loadBody = await load.json();
    assert.equal(load.status, 202, JSON.stringify(loadBody));
    assert.match(loadBody.taskId, /^load-/);
    await waitFor("the lifecycle_request frame", () => frames.length > 0);
    assert.equal(frames[0]?.operation, "model-load");
  } finally {
    ws?.close();
    await server.stop(5_000);
  }
});
