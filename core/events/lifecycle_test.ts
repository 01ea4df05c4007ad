import assert from "node:assert/strict";
import {
  addWorker,
  disconnect,
  newState,
  ofKind,
  only,
  pong,
  register,
  sent,
  step,
  tick,
  worker,
  type WorkerOpts,
} from "../_testing.ts";
import type { Effect } from "../effect.ts";
import {
  EXTENSION_CAPABILITIES,
  EXTENSION_LIFECYCLE,
  type LifecycleOperation,
  SUPPORTED_EXTENSIONS,
} from "../protocol/messages.ts";
import { eventFromFrame } from "./from_frame.ts";
import { modelStatuses } from "../state/lifecycle.ts";
import type { State } from "../state/state.ts";

const BOTH = [EXTENSION_CAPABILITIES, EXTENSION_LIFECYCLE];

/** Connects and registers a worker that lists `extensions` (ours) or none (original). */
function addExtWorker(
  state: State,
  id: string,
  extensions: string[] | undefined,
  opts: WorkerOpts = {},
): Effect[] {
  step(state, {
    kind: "workerConnectAttempted",
    atMs: state.nowMs,
    workerId: id,
    provider: "local",
    clientIp: "10.0.0.1",
    secretValid: true,
  });
  return step(state, {
    ...register(id, { ...opts, atMs: state.nowMs }),
    ...(extensions === undefined ? {} : { extensions }),
  });
}

function request(
  state: State,
  taskId: string,
  operation: LifecycleOperation,
  modelId: string | null,
  opts: {
    workerId?: string;
    params?: Record<string, unknown>;
    replyWanted?: boolean;
  } = {},
): Effect[] {
  return step(state, {
    kind: "lifecycleRequested",
    atMs: state.nowMs,
    taskId,
    operation,
    modelId,
    params: opts.params ?? {},
    workerId: opts.workerId ?? null,
    replyWanted: opts.replyWanted ?? false,
  });
}

function progress(
  state: State,
  workerId: string,
  taskId: string,
  status: "running" | "completed" | "failed",
  extra: { progress?: number; error?: string; result?: object } = {},
): Effect[] {
  return step(state, {
    kind: "lifecycleProgressReceived",
    atMs: state.nowMs,
    workerId,
    taskId,
    status,
    progress: extra.progress ?? null,
    error: extra.error ?? null,
    result: (extra.result as Record<string, unknown>) ?? null,
  });
}

function lastTask(effects: Effect[]) {
  const changes = ofKind(effects, "lifecycleTaskChanged");
  assert.ok(changes.length > 0, "expected a lifecycleTaskChanged effect");
  return changes[changes.length - 1]!.task;
}

Deno.test("extension negotiation: register_ack lists our extensions only to a worker that listed some", () => {
  const state = newState();
  const ours = only(addExtWorker(state, "w1", BOTH), "sendToWorker");
  assert.deepEqual(
    (ours.message as { extensions?: string[] }).extensions,
    [...SUPPORTED_EXTENSIONS],
  );
  assert.deepEqual(worker(state, "w1").extensions, BOTH);
  const original = only(addExtWorker(state, "w2", undefined), "sendToWorker");
  assert.equal("extensions" in original.message, false);
  assert.deepEqual(worker(state, "w2").extensions, []);
  // Unknown extension names are not adopted.
  addExtWorker(state, "w3", ["future-v9", EXTENSION_LIFECYCLE]);
  assert.deepEqual(worker(state, "w3").extensions, [EXTENSION_LIFECYCLE]);
});

Deno.test("register frames with and without extensions decode to the same event shape", () => {
  const base = {
    type: "register",
    worker_name: "a",
    models: ["m"],
    max_concurrent: 1,
  };
  const plain = eventFromFrame("w", 0, JSON.stringify(base), 1e6);
  assert.equal(plain.kind, "registerReceived");
  assert.equal("extensions" in plain, false);
  const ext = eventFromFrame(
    "w",
    0,
    JSON.stringify({ ...base, extensions: BOTH }),
    1e6,
  );
  assert.deepEqual((ext as { extensions?: string[] }).extensions, BOTH);
});

Deno.test("model-load with only original workers fails at once with 501 and sends nothing", () => {
  const state = newState();
  addWorker(state, "orig");
  const effects = request(state, "t1", "model-load", "llama");
  assert.equal(sent(effects, "lifecycle_request").length, 0);
  const task = lastTask(effects);
  assert.equal(task.status, "failed");
  assert.equal(task.error?.status, 501);
  assert.match(task.error!.message, /lifecycle-v1/);
});

Deno.test("model-load goes to the least-loaded capable worker, preferring one that lists the model as available", () => {
  const state = newState();
  addWorker(state, "orig", { maxConcurrent: 8 });
  addExtWorker(state, "busy", BOTH, { maxConcurrent: 8 });
  addExtWorker(state, "idle", BOTH, { maxConcurrent: 8 });
  pong(state, "busy", 3);
  pong(state, "idle", 1);
  let effects = request(state, "t1", "model-load", "big");
  assert.deepEqual(sent(effects, "lifecycle_request").map((m) => m.to), [
    "idle",
  ]);
  // The busy worker offers the model: it wins despite its load.
  step(state, {
    kind: "capabilitiesReceived",
    atMs: state.nowMs,
    workerId: "busy",
    capabilities: { models: { available: ["big"] } },
  });
  effects = request(state, "t2", "model-load", "big");
  const [m] = sent(effects, "lifecycle_request");
  assert.equal(m?.to, "busy");
  assert.deepEqual(m?.params, { modelId: "big" });
  assert.equal(m?.operation, "model-load");
  // An explicit worker is honoured, and an original worker is refused with 501.
  effects = request(state, "t3", "model-load", "big", { workerId: "idle" });
  assert.equal(sent(effects, "lifecycle_request")[0]?.to, "idle");
  effects = request(state, "t4", "model-load", "big", { workerId: "orig" });
  assert.equal(lastTask(effects).error?.status, 501);
  effects = request(state, "t5", "model-load", "big", { workerId: "nope" });
  assert.equal(lastTask(effects).error?.status, 404);
});

Deno.test("progress folds into the task and completion ends it", () => {
  const state = newState();
  addExtWorker(state, "w1", BOTH);
  request(state, "t1", "model-load", "big");
  let task = lastTask(
    progress(state, "w1", "t1", "running", { progress: 0.5 }),
  );
  assert.equal(task.status, "running");
  assert.equal(task.progress, 0.5);
  assert.deepEqual(
    modelStatuses(state).find((m) => m.id === "big"),
    {
      id: "big",
      status: "loading",
      workers: ["w1"],
      progress: 0.5,
      taskId: "t1",
    },
  );
  task = lastTask(
    progress(state, "w1", "t1", "completed", { result: { loadTimeMs: 9 } }),
  );
  assert.equal(task.status, "completed");
  assert.equal(task.progress, 1);
  assert.deepEqual(task.parts[0]?.result, { loadTimeMs: 9 });
  // A late or foreign report changes nothing.
  assert.equal(
    ofKind(progress(state, "w1", "t1", "failed"), "lifecycleTaskChanged")
      .length,
    0,
  );
  assert.equal(
    ofKind(progress(state, "w2", "t9", "running"), "lifecycleTaskChanged")
      .length,
    0,
  );
});

Deno.test("unload goes to every capable worker that has the model; a backend lacking the operation fails it with 501", () => {
  const state = newState();
  addExtWorker(state, "a", BOTH, { models: ["big"] });
  addExtWorker(state, "b", BOTH, { models: ["big", "small"] });
  addExtWorker(state, "c", BOTH, { models: ["small"] });
  addWorker(state, "orig", { models: ["big"] });
  const effects = request(state, "t1", "model-unload", "big");
  assert.deepEqual(
    sent(effects, "lifecycle_request").map((m) => m.to).sort(),
    ["a", "b"],
  );
  progress(state, "a", "t1", "failed", {
    error: "backend lacks unload",
    result: { status: 501 },
  });
  const task = lastTask(progress(state, "b", "t1", "failed", {
    error: "ollama has no flush",
    result: { status: 501 },
  }));
  assert.equal(task.status, "failed");
  assert.equal(task.error?.status, 501);
  assert.match(task.error!.message, /backend lacks unload/);
  // A model nobody holds: 404.
  assert.equal(
    lastTask(request(state, "t2", "model-unload", "ghost")).error?.status,
    404,
  );
});

Deno.test("cache-flush scope all reaches every capable worker, scope model only holders", () => {
  const state = newState();
  addExtWorker(state, "a", BOTH, { models: ["big"] });
  addExtWorker(state, "b", BOTH, { models: ["small"] });
  addWorker(state, "orig", { models: ["big"] });
  let effects = request(state, "t1", "cache-flush", null, {
    params: { scope: "all" },
  });
  assert.deepEqual(sent(effects, "lifecycle_request").map((m) => m.to), [
    "a",
    "b",
  ]);
  effects = request(state, "t2", "cache-flush", "small", {
    params: { scope: "model" },
  });
  assert.deepEqual(sent(effects, "lifecycle_request").map((m) => m.to), [
    "b",
  ]);
  effects = request(state, "t3", "cache-flush", null, {
    params: { scope: "tenant", tenantId: "x" },
  });
  const m = sent(effects, "lifecycle_request");
  assert.equal(m.length, 2);
  assert.deepEqual(m[0]?.params, { scope: "tenant", tenantId: "x" });
});

Deno.test("a worker that disconnects mid-task fails its part; a silent one fails at the deadline", () => {
  const state = newState({ lifecycleTaskTimeoutMs: 1000 });
  addExtWorker(state, "a", BOTH, { models: ["big"] });
  addExtWorker(state, "b", BOTH, { models: ["big"] });
  request(state, "t1", "model-unload", "big");
  progress(state, "a", "t1", "completed");
  const task = lastTask(disconnect(state, "b"));
  assert.equal(task.status, "failed");
  assert.match(task.error!.message, /worker left/);
  request(state, "t2", "model-unload", "big");
  const expired = lastTask(tick(state, state.nowMs + 1000));
  assert.equal(expired.status, "failed");
  assert.match(expired.error!.message, /no final answer/);
});

Deno.test("the task table is bounded: the oldest finished tasks are evicted", () => {
  const state = newState({ lifecycleTasksMax: 3 });
  addExtWorker(state, "a", BOTH);
  request(state, "running", "model-load", "x");
  for (let i = 0; i < 5; i++) request(state, `f${i}`, "model-unload", "none");
  assert.deepEqual([...state.lifecycleTasks.keys()], ["running", "f3", "f4"]);
});

Deno.test("capabilities are kept only from a worker that negotiated them", () => {
  const state = newState();
  addExtWorker(state, "ours", BOTH);
  addWorker(state, "orig");
  const caps = { models: { loaded: [{ id: "big" }] }, health: "healthy" };
  for (const id of ["ours", "orig"]) {
    step(state, {
      kind: "capabilitiesReceived",
      atMs: 5,
      workerId: id,
      capabilities: caps,
    });
  }
  assert.deepEqual(worker(state, "ours").capabilities, caps);
  assert.equal(worker(state, "orig").capabilities, null);
  assert.equal(
    modelStatuses(state).find((m) => m.id === "big")?.status,
    "loaded",
  );
});

function replies(effects: Effect[]): [string, string][] {
  return ofKind(effects, "replyLifecycle").map((e) => [e.task.id, e.reply]);
}

Deno.test("reply: a load caller is answered at once, accepted; nobody waiting, no reply", () => {
  const state = newState();
  addExtWorker(state, "w1", BOTH);
  const waited = request(state, "t1", "model-load", "m", { replyWanted: true });
  assert.deepEqual(replies(waited), [["t1", "accepted"]]);
  assert.deepEqual(replies(request(state, "t2", "model-load", "m")), []);
  assert.equal(state.lifecycleReplies.size, 0);
});

Deno.test("reply: a task that fails at once is refused at once", () => {
  const state = newState();
  addWorker(state, "orig");
  const effects = request(state, "t1", "model-unload", "m", {
    replyWanted: true,
  });
  assert.deepEqual(replies(effects), [["t1", "refused"]]);
  assert.equal(only(effects, "replyLifecycle").task.error?.status, 501);
});

Deno.test("reply: an unload caller is answered when the task ends, once", () => {
  const state = newState();
  addExtWorker(state, "w1", BOTH, { models: ["m"] });
  const started = request(state, "t1", "model-unload", "m", {
    replyWanted: true,
  });
  assert.deepEqual(replies(started), []);
  assert.deepEqual(
    replies(progress(state, "w1", "t1", "running", { progress: 0.5 })),
    [],
  );
  const done = progress(state, "w1", "t1", "completed");
  assert.deepEqual(replies(done), [["t1", "finished"]]);
  assert.equal(state.lifecycleReplies.size, 0);
  assert.deepEqual(replies(tick(state, state.nowMs + 60_000)), []);
});

Deno.test("reply: a flush caller still waiting after lifecycleReplyWaitMs gets the running task, on tick", () => {
  const state = newState({ lifecycleReplyWaitMs: 1_000 });
  addExtWorker(state, "w1", BOTH);
  request(state, "t1", "cache-flush", null, { replyWanted: true });
  assert.deepEqual(replies(tick(state, 999)), []);
  const late = tick(state, 1_000);
  assert.deepEqual(replies(late), [["t1", "pending"]]);
  assert.equal(only(late, "replyLifecycle").task.status, "running");
  assert.deepEqual(replies(progress(state, "w1", "t1", "completed")), []);
});

Deno.test("reply: a waiting caller whose worker leaves is answered with the failure", () => {
  const state = newState();
  addExtWorker(state, "w1", BOTH);
  request(state, "t1", "cache-flush", null, { replyWanted: true });
  const gone = disconnect(state, "w1");
  assert.deepEqual(replies(gone), [["t1", "finished"]]);
  assert.equal(only(gone, "replyLifecycle").task.status, "failed");
});
