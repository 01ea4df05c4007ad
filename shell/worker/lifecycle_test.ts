// Issue 9 on the worker side: extension frames only to a server that listed them,
// and the lifecycle adapter against a spec 004 runner and a plain backend.
import assert from "node:assert/strict";
import { startMockBackend } from "../../mock/backend.ts";
import { startMockRunner } from "../../mock/runner.ts";
import { startTestProxy } from "./_test_proxy.ts";
import { runTestWorker, testConfig } from "./_test_worker.ts";
import {
  initialWorkerState,
  step,
  WORKER_EXTENSIONS,
} from "../../core/worker/mod.ts";
import { detectBackend } from "./lifecycle/backends.ts";
import { assertFailed, runAdapter } from "./lifecycle/_run_adapter.ts";
import { readCapabilities } from "./lifecycle/capabilities.ts";

const EXTENSION_FRAMES = ["capabilities", "lifecycle_progress"];

Deno.test("compatibility: against an original-style server (register_ack without extensions) our worker sends no extension frame and ignores lifecycle_request", async () => {
  const runner = await startMockRunner({ loaded: ["mock-model"] });
  const proxy = await startTestProxy();
  const worker = runTestWorker(testConfig(proxy.url, runner.url));
  try {
    const reg = await proxy.waitFrame("register", (f) => f.type === "register");
    assert.deepEqual(reg.extensions, WORKER_EXTENSIONS);
    await new Promise((r) => setTimeout(r, 100));
    proxy.send({
      type: "lifecycle_request",
      task_id: "t1",
      operation: "model-unload",
      params: { modelId: "mock-model" },
    });
    proxy.send({ type: "ping", timestamp_unix_ms: 1 });
    await proxy.waitFrame("pong", (f) => f.type === "pong");
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(
      proxy.frames.filter((f) => EXTENSION_FRAMES.includes(f.type)),
      [],
    );
    assert.equal(runner.stats.lifecycleCalls, 0);
    assert.deepEqual(runner.loaded(), ["mock-model"]);
  } finally {
    worker.signal();
    await worker.done;
    await proxy.close();
    await runner.close();
  }
});

Deno.test("decide: capabilities only after a register_ack listing the extension, and only on change", () => {
  const s = initialWorkerState({
    workerName: "w",
    maxConcurrent: 1,
    models: ["m"],
    modelsDiscovered: false,
    drainTimeoutSecs: 1,
    onServerShutdown: "exit",
  });
  step(s, { atMs: 0, kind: "socketOpened" });
  const ack = (extensions?: string[]) =>
    step(s, {
      atMs: 0,
      kind: "frameReceived",
      text: JSON.stringify({
        type: "register_ack",
        worker_id: "x",
        models: ["m"],
        ...(extensions === undefined ? {} : { extensions }),
      }),
    });
  assert.equal(ack().some((a) => a.kind === "probeCapabilities"), false);
  const caps = {
    atMs: 0,
    kind: "capabilitiesRead" as const,
    capabilities: { health: "healthy" },
  };
  assert.deepEqual(step(s, caps), []);
  assert.deepEqual(
    step(s, { atMs: 0, kind: "capabilitiesDue" }).filter((a) =>
      a.kind !== "armTimer"
    ),
    [],
  );
  assert.ok(
    ack(["capabilities-v1", "lifecycle-v1"]).some((a) =>
      a.kind === "probeCapabilities"
    ),
  );
  const sent = step(s, caps);
  assert.deepEqual(sent, [{
    kind: "send",
    message: { type: "capabilities", capabilities: { health: "healthy" } },
  }]);
  assert.deepEqual(step(s, caps), [], "unchanged capabilities are not resent");
  // A completed static-model load is announced with models_update.
  const req = step(s, {
    atMs: 0,
    kind: "frameReceived",
    text: JSON.stringify({
      type: "lifecycle_request",
      task_id: "t",
      operation: "model-load",
      params: { modelId: "big" },
    }),
  });
  assert.ok(req.some((a) => a.kind === "runLifecycle"));
  const done = step(s, {
    atMs: 0,
    kind: "lifecycleUpdate",
    taskId: "t",
    status: "completed",
    progress: 1,
    error: null,
    result: null,
  });
  assert.ok(
    done.some((a) =>
      a.kind === "send" && a.message.type === "models_update" &&
      a.message.models.includes("big")
    ),
  );
});

Deno.test("adapter: a spec 004 runner is detected and loads with progress; a plain backend fails with 501 naming what it lacks", async () => {
  const runner = await startMockRunner({
    available: ["big"],
    loadSteps: 3,
    stepMs: 150,
  });
  const plain = await startMockBackend();
  try {
    assert.equal(await detectBackend(runner.url), "spec004");
    assert.equal(await detectBackend(plain.url), "none");
    const reports = await runAdapter(runner.url, "spec004", "model-load", {
      modelId: "big",
    });
    assert.equal(reports.at(-1)?.status, "completed");
    assert.ok(reports.some((r) => r.status === "running"));
    assert.deepEqual(runner.loaded(), ["big"]);
    const caps = await readCapabilities(runner.url, "spec004");
    assert.deepEqual(caps?.models?.loaded?.map((m) => m.id), ["big"]);
    const derived = await readCapabilities(plain.url, "none");
    assert.deepEqual(derived?.models?.loaded?.map((m) => m.id), ["mock-model"]);
    const failed = await runAdapter(plain.url, "none", "model-load", {
      modelId: "x",
    });
    assertFailed(
      failed[0]!,
      /501 not implemented: the backend offers no model lifecycle API/,
      501,
    );
  } finally {
    await runner.close();
    await plain.close();
  }
});
