// Issue 9: governed lifecycle operations through the relay, with real sockets.
import assert from "node:assert/strict";
import { SUPPORTED_EXTENSIONS } from "../../../core/mod.ts";
import { startMockRunner } from "../../../mock/runner.ts";
import {
  runTestWorker,
  testConfig as workerConfig,
} from "../../worker/_test_worker.ts";
import {
  ADMIN_TOKEN,
  startTestRelay,
  type TestRelay,
  withTestRelay,
} from "../_relay_test_helpers.ts";
import {
  chatBody,
  registeredWorker,
  testConfig,
  waitFor,
} from "../_test_helpers.ts";
import {
  encodeCompactOpToken,
  encodeOpToken,
  type OpToken,
  type SignedCall,
  signOpToken,
} from "./op_token.ts";

const KEY = new TextEncoder().encode("0123456789abcdef-test-key");
const SIGNERS = ["admin1", "admin2", "admin3"];
const EXT = ["capabilities-v1", "lifecycle-v1"];
let nonceSeq = 0;

async function keyFile(): Promise<string> {
  const path = await Deno.makeTempFile({ suffix: ".key" });
  await Deno.writeFile(path, new Uint8Array([...KEY, 0x0a]));
  return path;
}

function token(over: Partial<SignedCall> = {}, key = KEY): string {
  return encodeOpToken({
    operation: "model-load",
    modelId: "big",
    issuedAt: Math.floor(Date.now() / 1000),
    signers: ["admin1", "admin2"],
    nonce: `n-${Date.now()}-${nonceSeq++}`,
    ...over,
  }, key);
}

async function relayWith(dbPath = ":memory:"): Promise<TestRelay> {
  return await startTestRelay(testConfig({}, {
    dbPath,
    adminToken: ADMIN_TOKEN,
    opTokenKeyPath: await keyFile(),
    opTokenSigners: SIGNERS,
    opTokenMinSigners: 2,
  }));
}

async function post(relay: TestRelay, path: string, body: unknown) {
  const res = await fetch(relay.url + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

Deno.test("op token: every failed check has its own status and message, and the worker never sees the call", async () => {
  const relay = await relayWith();
  const w = await registeredWorker(relay, { models: ["m1"], extensions: EXT });
  try {
    // Our server offers every extension it speaks, not only the two asked.
    assert.deepEqual(w.ack.extensions, SUPPORTED_EXTENSIONS);
    const cases: [string, unknown, number, string, RegExp][] = [
      [
        "bad signature",
        token({}, new TextEncoder().encode("another-key-000000")),
        401,
        "op_token_bad_signature",
        /signature/,
      ],
      [
        "expired",
        token({ issuedAt: Math.floor(Date.now() / 1000) - 301 }),
        401,
        "op_token_expired",
        /issued 3\d\d s ago/,
      ],
      [
        "from the future",
        token({ issuedAt: Math.floor(Date.now() / 1000) + 400 }),
        401,
        "op_token_expired",
        /in the future/,
      ],
      [
        "too few signers",
        token({ signers: ["admin1", "mallory"] }),
        403,
        "op_token_insufficient_signers",
        /1 distinct configured signer/,
      ],
      [
        "wrong operation",
        token({ operation: "model-unload" }),
        403,
        "op_token_wrong_operation",
        /"model-unload"/,
      ],
      [
        "wrong model",
        token({ modelId: "other" }),
        403,
        "op_token_wrong_model",
        /"other"/,
      ],
      ["malformed", "not-a-token!!", 400, "invalid_op_token", /malformed/],
      ["missing", undefined, 401, "missing_op_token", /governed/],
    ];
    for (const [what, tok, status, code, message] of cases) {
      const r = await post(relay, "/v1/models/load", {
        modelId: "big",
        verifiedOpToken: tok,
      });
      assert.equal(r.status, status, what);
      assert.equal(r.body.error.code, code, what);
      assert.match(r.body.error.message, message, what);
    }
    // A valid token as a JSON object (not base64) passes; its replay is refused.
    const op: OpToken = {
      operation: "model-load",
      modelId: "big",
      issuedAt: Math.floor(Date.now() / 1000),
      signers: ["admin3", "admin2"],
      nonce: "valid-1",
    };
    const valid = { opToken: op, signature: signOpToken(op, KEY) };
    const ok = await post(relay, "/v1/models/load", {
      modelId: "big",
      verifiedOpToken: valid,
    });
    assert.equal(ok.status, 202);
    assert.match(ok.body.taskId, /^load-/);
    const frame = await w.next("lifecycle_request");
    assert.equal(frame.task_id, ok.body.taskId);
    const replay = await post(relay, "/v1/models/load", {
      modelId: "big",
      verifiedOpToken: JSON.stringify(valid),
    });
    assert.equal(replay.status, 409);
    assert.equal(replay.body.error.code, "op_token_replayed");
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(
      w.frames.filter((f) => f.type === "lifecycle_request").length,
      1,
      "only the valid call reached the worker",
    );
  } finally {
    await w.close();
    await relay.close();
  }
});

Deno.test("issue 32: an op token in the compact header.payload.signature form (HS256) passes; a changed payload, another key or another alg do not", async () => {
  const relay = await relayWith();
  const w = await registeredWorker(relay, { models: ["m1"], extensions: EXT });
  try {
    const op = (nonce: string): SignedCall => ({
      operation: "model-load",
      modelId: "big",
      issuedAt: Math.floor(Date.now() / 1000),
      signers: ["admin1", "admin2"],
      nonce,
    });
    const b64 = (v: unknown) =>
      Buffer.from(JSON.stringify(v)).toString("base64url");
    const good = encodeCompactOpToken(op("compact-1"), KEY);
    const [header, , sig] = good.split(".");
    const cases: [string, string, number, string][] = [
      [
        "another key",
        encodeCompactOpToken(
          op("compact-2"),
          new TextEncoder().encode("another-key-000000"),
        ),
        401,
        "op_token_bad_signature",
      ],
      [
        "a changed payload",
        `${header}.${b64({ ...op("compact-1"), modelId: "big2" })}.${sig}`,
        401,
        "op_token_bad_signature",
      ],
      [
        "alg none",
        `${b64({ alg: "none" })}.${b64(op("compact-3"))}.${sig}`,
        400,
        "invalid_op_token",
      ],
    ];
    for (const [what, tok, status, code] of cases) {
      const r = await post(relay, "/v1/models/load", {
        modelId: "big",
        verifiedOpToken: tok,
      });
      assert.equal(r.status, status, what);
      assert.equal(r.body.error.code, code, what);
    }
    const ok = await post(relay, "/v1/models/load", {
      modelId: "big",
      verifiedOpToken: good,
    });
    assert.equal(ok.status, 202);
    assert.equal((await w.next("lifecycle_request")).task_id, ok.body.taskId);
    const replay = await post(relay, "/v1/models/load", {
      modelId: "big",
      verifiedOpToken: good,
    });
    assert.equal(replay.body.error.code, "op_token_replayed");
  } finally {
    await w.close();
    await relay.close();
  }
});

Deno.test("a widened op token is refused with op_token_params_mismatch, and nothing reaches a worker", async () => {
  const relay = await relayWith();
  const w = await registeredWorker(relay, {
    models: ["m1", "small"],
    extensions: EXT,
  });
  try {
    const workerId = w.ack.worker_id as string;
    const load = token({ gpuMemoryBudgetMB: 1000, workerId });
    const flush = token({
      operation: "cache-flush",
      modelId: null,
      scope: "tenant",
      tenantId: "team-a",
    });
    const cases: [string, string, Record<string, unknown>, RegExp][] = [
      ["evictModel added", "/v1/models/load", {
        modelId: "big",
        gpuMemoryBudgetMB: 1000,
        workerId,
        evictModel: "small",
        verifiedOpToken: load,
      }, /evictModel: signed absent, sent "small"/],
      ["budget raised", "/v1/models/load", {
        modelId: "big",
        gpuMemoryBudgetMB: 80000,
        workerId,
        verifiedOpToken: load,
      }, /gpuMemoryBudgetMB: signed 1000, sent 80000/],
      ["other worker", "/v1/models/load", {
        modelId: "big",
        gpuMemoryBudgetMB: 1000,
        workerId: "w-other",
        verifiedOpToken: load,
      }, /workerId/],
      ["parameter dropped", "/v1/models/load", {
        modelId: "big",
        workerId,
        verifiedOpToken: load,
      }, /gpuMemoryBudgetMB: signed 1000, sent absent/],
      ["other tenant", "/v1/cache/flush", {
        scope: "tenant",
        tenantId: "team-b",
        verifiedOpToken: flush,
      }, /tenantId: signed "team-a", sent "team-b"/],
      ["scope widened", "/v1/cache/flush", {
        scope: "all",
        verifiedOpToken: flush,
      }, /scope: signed "tenant", sent "all"/],
    ];
    for (const [what, path, body, message] of cases) {
      const r = await post(relay, path, body);
      assert.equal(r.status, 403, what);
      assert.equal(r.body.error.code, "op_token_params_mismatch", what);
      assert.match(r.body.error.message, message, what);
    }
    const reserved = await post(relay, "/v1/models/load", {
      modelId: "big",
      nonce: "x",
      verifiedOpToken: load,
    });
    assert.equal(reserved.status, 400);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(w.frames.some((f) => f.type === "lifecycle_request"), false);
    // The refusals burned no nonce: the exact signed calls still pass.
    const ok = await post(relay, "/v1/models/load", {
      modelId: "big",
      gpuMemoryBudgetMB: 1000,
      workerId,
      verifiedOpToken: load,
    });
    assert.equal(ok.status, 202, JSON.stringify(ok.body));
    const frame = await w.next("lifecycle_request");
    assert.equal(
      (frame.params as Record<string, unknown>).gpuMemoryBudgetMB,
      1000,
    );
    const flushed = post(relay, "/v1/cache/flush", {
      scope: "tenant",
      tenantId: "team-a",
      verifiedOpToken: flush,
    });
    const f2 = await w.next("lifecycle_request");
    assert.equal((f2.params as Record<string, unknown>).tenantId, "team-a");
    w.send({
      type: "lifecycle_progress",
      task_id: f2.task_id,
      status: "completed",
      result: { entriesRemoved: 1 },
    });
    assert.equal((await flushed).status, 200);
  } finally {
    await w.close();
    await relay.close();
  }
});

Deno.test("op token: a nonce stays used after a restart on the same database", async () => {
  const dir = await Deno.makeTempDir();
  const dbPath = `${dir}/relay.db`;
  const tok = token({ operation: "cache-flush", modelId: null, scope: "all" });
  let relay = await relayWith(dbPath);
  let w = await registeredWorker(relay, { extensions: EXT });
  try {
    const first = post(relay, "/v1/cache/flush", {
      scope: "all",
      verifiedOpToken: tok,
    });
    const frame = await w.next("lifecycle_request");
    w.send({
      type: "lifecycle_progress",
      task_id: frame.task_id,
      status: "completed",
      result: { entriesRemoved: 3 },
    });
    const r = await first;
    assert.equal(r.status, 200);
    assert.equal(r.body.entriesRemoved, 3);
  } finally {
    await w.close();
    await relay.close();
  }
  relay = await relayWith(dbPath);
  w = await registeredWorker(relay, { extensions: EXT });
  try {
    const again = await post(relay, "/v1/cache/flush", {
      scope: "all",
      verifiedOpToken: tok,
    });
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, "op_token_replayed");
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(w.frames.some((f) => f.type === "lifecycle_request"), false);
  } finally {
    await w.close();
    await relay.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("lifecycle routes answer 503 saying how to configure the key when VERIFIED_OP_TOKEN_KEY_PATH is unset", async () => {
  await withTestRelay(testConfig(), async (relay) => {
    const r = await post(relay, "/v1/models/load", {
      modelId: "big",
      verifiedOpToken: token(),
    });
    assert.equal(r.status, 503);
    assert.equal(r.body.error.code, "lifecycle_unconfigured");
    assert.match(r.body.error.message, /VERIFIED_OP_TOKEN_KEY_PATH/);
  });
});

Deno.test("compatibility: an original-style worker gets no extensions in register_ack and never an extension frame; a load with only such workers is 501", async () => {
  const relay = await relayWith();
  const w = await registeredWorker(relay, { models: ["big"] });
  try {
    assert.equal("extensions" in w.ack, false);
    const r = await post(relay, "/v1/models/unload", {
      modelId: "big",
      verifiedOpToken: token({ operation: "model-unload" }),
    });
    assert.equal(r.status, 501);
    assert.match(r.body.error.message, /lifecycle-v1/);
    const caps = await fetch(`${relay.url}/v1/capabilities`, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    }).then((x) => x.json());
    assert.deepEqual(caps.workers[0].extensions, []);
    await new Promise((r) => setTimeout(r, 50));
    const known = [
      "register_ack",
      "request",
      "cancel",
      "ping",
      "graceful_shutdown",
      "models_refresh",
    ];
    assert.ok(
      w.frames.every((f) => known.includes(f.type)),
      JSON.stringify(w.frames),
    );
  } finally {
    await w.close();
    await relay.close();
  }
});

Deno.test("end to end: load a model onto a mock runner through the relay and our worker, poll it, use it, unload it", async () => {
  const runner = await startMockRunner({
    loaded: ["small"],
    available: ["big"],
    loadSteps: 4,
    stepMs: 40,
  });
  const relay = await relayWith();
  const worker = runTestWorker(
    workerConfig(relay.url, runner.url, { models: null }),
    ["small"],
  );
  try {
    await waitFor(
      "worker capabilities",
      () =>
        [...relay.runtime.state.workers.values()].some((x) =>
          x.capabilities !== null
        ),
    );
    let caps = await fetch(`${relay.url}/v1/capabilities`).then((r) =>
      r.json()
    );
    assert.deepEqual(caps.models.available, ["big"]);
    assert.equal(caps.resources.gpuMemoryTotalMB, 81920);
    assert.equal(caps.queue.maxDepth, 100);

    const load = await post(relay, "/v1/models/load", {
      modelId: "big",
      quantization: "fp16",
      verifiedOpToken: token({ quantization: "fp16" }),
    });
    assert.equal(load.status, 202, JSON.stringify(load.body));
    assert.equal(load.body.status, "loading");
    const taskId = load.body.taskId as string;
    const seen = new Set<string>();
    let last: Record<string, unknown> = {};
    await waitFor("load completed", async () => {
      last = await fetch(`${relay.url}/v1/models/load/${taskId}`).then((r) =>
        r.json()
      );
      seen.add(String(last.status));
      if (last.status === "loading") {
        const models = await fetch(`${relay.url}/v1/models`).then((r) =>
          r.json()
        );
        const big = models.data.find((m: { id: string }) => m.id === "big");
        if (big !== undefined) seen.add(`models:${big.status}`);
      }
      return last.status === "completed";
    }, 10_000);
    assert.ok(seen.has("loading"));
    assert.equal(last.modelId, "big");
    assert.equal(typeof last.loadTimeMs, "number");
    assert.equal(runner.stats.loads, 1);
    assert.equal(
      (runner.stats.lastLifecycleBody as { quantization?: string })
        .quantization,
      "fp16",
    );

    await waitFor("big acked", async () => {
      const models = await fetch(`${relay.url}/v1/models`).then((r) =>
        r.json()
      );
      return models.data.some((m: { id: string; status: string }) =>
        m.id === "big" && m.status === "loaded"
      );
    });
    caps = await fetch(`${relay.url}/v1/capabilities`).then((r) => r.json());
    assert.ok(caps.models.loaded.some((m: { id: string }) => m.id === "big"));

    for (let i = 0; i < 2; i++) {
      const chat = await fetch(`${relay.url}/v1/chat/completions`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-cache-tag": "s1",
          "x-tenant-id": "team-a",
        },
        body: chatBody("big"),
      });
      assert.equal(chat.status, 200);
      assert.equal(chat.headers.get("x-cache-hit"), i === 0 ? "false" : "true");
      assert.ok(Number(chat.headers.get("x-gpu-time-ms")) >= 1);
      const body = await chat.json();
      assert.ok(JSON.stringify(body).includes("choices"));
    }
    const metrics = await fetch(`${relay.url}/metrics`).then((r) => r.text());
    assert.match(metrics, /modelrelay_cache_hits_total\{model="big"\} 1/);
    assert.match(
      metrics,
      /modelrelay_tenant_requests_total\{tenant="team-a",outcome="completed"\} 2/,
    );
    assert.match(
      metrics,
      /modelrelay_lifecycle_tasks_total\{operation="model-load",status="completed"\} 1/,
    );

    const flush = await post(relay, "/v1/cache/flush", {
      scope: "model",
      modelId: "big",
      verifiedOpToken: token({ operation: "cache-flush", scope: "model" }),
    });
    assert.equal(flush.status, 200, JSON.stringify(flush.body));
    assert.equal(flush.body.entriesRemoved, 1);

    const unload = await post(relay, "/v1/models/unload", {
      modelId: "big",
      verifiedOpToken: token({ operation: "model-unload" }),
    });
    assert.equal(unload.status, 200, JSON.stringify(unload.body));
    assert.equal(unload.body.gpuMemoryFreedMB, 8000);
    assert.equal(unload.body.kvCacheFlushed, true);
    await waitFor("big gone", async () => {
      const models = await fetch(`${relay.url}/v1/models`).then((r) =>
        r.json()
      );
      return !models.data.some((m: { id: string }) => m.id === "big");
    });
    assert.deepEqual(runner.loaded(), ["small"]);
  } finally {
    worker.signal();
    await worker.done;
    await relay.close();
    await runner.close();
  }
});

Deno.test("a malformed percent-escape in a lifecycle path gets 400 with a body", async () => {
  await withTestRelay(
    testConfig({}, {
      adminToken: "t0k3n-for-paths",
    }),
    async (relay) => {
      const poll = await fetch(`${relay.url}/v1/models/load/%ZZ`);
      assert.equal(poll.status, 400);
      const body = await poll.json();
      assert.equal(body.error.code, "invalid_task_id");
      assert.match(body.error.message, /%ZZ/);
      // The admin routes with an id in the path answer the same way.
      const adminPaths: [string, string][] = [
        ["POST", "/admin/workers/%E0%A4%A/drain"],
        ["DELETE", "/admin/keys/%ZZ"],
      ];
      for (const [method, path] of adminPaths) {
        const res = await fetch(relay.url + path, {
          method,
          headers: { authorization: "Bearer t0k3n-for-paths" },
        });
        assert.equal(res.status, 400, path);
        assert.equal((await res.json()).error.code, "invalid_path", path);
      }
      // A well-formed unknown id is still 404.
      const unknown = await fetch(`${relay.url}/v1/models/load/load-%41`);
      assert.equal(unknown.status, 404);
      await unknown.body?.cancel();
    },
  );
});
