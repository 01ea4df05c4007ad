// Issue 30: residency as core state and hot-first placement.
import assert from "node:assert/strict";
import {
  addRequest,
  addWorker,
  chunk,
  complete,
  dispatched,
  logs,
  newState,
  ofKind,
  queued,
  reportResidency,
  requestEvent,
  residencyBoxes,
  routed,
  step,
  tick,
  worker,
} from "../_testing.ts";
import { EXTENSION_RESIDENCY } from "../protocol/messages.ts";

const report = reportResidency;

/** Two boxes that both list a and b, room for one model each. */
const twoBoxes = residencyBoxes;

Deno.test("residency from a worker that did not negotiate it is ignored", () => {
  const s = newState();
  addWorker(s, "w1", { models: ["a", "b"], extensions: [] });
  const effects = report(s, "w1", ["a"]);
  assert.equal(
    logs(effects, "ignored residency from a worker that did not negotiate it")
      .length,
    1,
  );
  assert.equal(worker(s, "w1").residency, null);
  assert.equal(s.residencyWorkers, 0);
});

Deno.test("a request goes to the worker that has its model loaded, not the least loaded", () => {
  const s = twoBoxes();
  report(s, "w1", ["a"]);
  report(s, "w2", ["b"]);
  addRequest(s, "x", { model: "b" }); // w2 busier now
  assert.deepEqual(routed(s, "r1", { model: "b" }), [["r1", "w2"]]);
  assert.deepEqual(routed(s, "r2", { model: "a" }), [["r2", "w1"]]);
});

Deno.test("a model nobody holds loads on a worker with free room, never evicting a model with demand", () => {
  const s = twoBoxes();
  report(s, "w1", ["a"]);
  report(s, "w2", [], 1);
  const effects = addRequest(s, "r1", { model: "b" });
  assert.deepEqual(dispatched(effects), [["r1", "w2"]]);
  const load = ofKind(effects, "modelLoadStarted");
  assert.equal(load.length, 1);
  assert.equal(load[0]!.model, "b");
  assert.equal(load[0]!.evicting, null);
  assert.equal(load[0]!.reason, "demand");
  assert.equal(load[0]!.triggeredBy, "r1");
  assert.equal(s.requests.get("r1")!.waitsForLoad, true);
  assert.deepEqual([...worker(s, "w2").residency!.loading.keys()], ["b"]);
});

Deno.test("with both boxes' models in use, a third model waits instead of evicting", () => {
  const s = newState();
  for (const id of ["w1", "w2"]) {
    addWorker(s, id, {
      models: ["a", "b", "c"],
      maxConcurrent: 2,
      extensions: [EXTENSION_RESIDENCY],
    });
  }
  report(s, "w1", ["a"]);
  report(s, "w2", ["b"]);
  addRequest(s, "ra", { model: "a" });
  addRequest(s, "rb", { model: "b" });
  const effects = addRequest(s, "rc", { model: "c" });
  assert.deepEqual(dispatched(effects), []);
  assert.deepEqual(ofKind(effects, "modelLoadStarted"), []);
  assert.deepEqual(queued(s), ["rc"]);
  // a's request ends: a is idle with no queued demand, so c may take w1's room.
  const done = complete(s, "w1", "ra");
  assert.deepEqual(dispatched(done), [["rc", "w1"]]);
  const load = ofKind(done, "modelLoadStarted");
  assert.equal(load[0]!.evicting, "a");
  assert.equal(ofKind(done, "modelEvicted")[0]!.model, "a");
});

Deno.test("requests for a loading model join its load instead of starting another", () => {
  const s = twoBoxes();
  report(s, "w1", [], 1);
  report(s, "w2", [], 1);
  addRequest(s, "r1", { model: "a" });
  const effects = addRequest(s, "r2", { model: "a" });
  assert.deepEqual(dispatched(effects), [["r2", "w1"]]);
  assert.deepEqual(ofKind(effects, "modelLoadStarted"), []);
});

Deno.test("the first byte marks the model loaded and measures its load", () => {
  const s = twoBoxes();
  report(s, "w1", [], 1);
  report(s, "w2", ["b"], 1);
  addRequest(s, "r1", { model: "a", stream: true });
  s.nowMs = 4_000;
  const effects = chunk(s, "w1", "r1", "data: x\n\n", 4_000);
  const fin = ofKind(effects, "modelLoadFinished");
  assert.equal(fin.length, 1);
  assert.equal(fin[0]!.loadMs, 4_000);
  assert.equal(s.modelTimes.get("local\u0000a")!.loadMsAvg, 4_000);
  assert.deepEqual([...worker(s, "w1").residency!.loaded.keys()], ["a"]);
});

Deno.test("a stale report does not drop a load the core just started", () => {
  const s = twoBoxes();
  report(s, "w1", [], 1);
  report(s, "w2", ["b"], 1);
  addRequest(s, "r1", { model: "a" });
  report(s, "w1", [], 1);
  assert.deepEqual([...worker(s, "w1").residency!.loading.keys()], ["a"]);
});

Deno.test("wait for a busy hot worker when its service time beats a load", () => {
  const s = twoBoxes({ modelLoadMsAssumed: 30_000 }, 1);
  report(s, "w1", ["a"]);
  report(s, "w2", [], 1);
  // One a measured at 1 s on w1.
  addRequest(s, "r0", { model: "a" });
  s.nowMs = 1_000;
  complete(s, "w1", "r0", { atMs: 1_000 });
  addRequest(s, "r1", { model: "a" }); // takes w1's only slot
  const effects = addRequest(s, "r2", { model: "a" });
  assert.deepEqual(dispatched(effects), []);
  assert.deepEqual(queued(s), ["r2"]);
});

Deno.test("load elsewhere when the expected wait is longer than a load", () => {
  const s = twoBoxes({ modelLoadMsAssumed: 2_000 }, 1);
  report(s, "w1", ["a"]);
  report(s, "w2", [], 1);
  addRequest(s, "r0", { model: "a" });
  s.nowMs = 10_000;
  complete(s, "w1", "r0", { atMs: 10_000 }); // service 10 s
  addRequest(s, "r1", { model: "a" });
  const effects = addRequest(s, "r2", { model: "a" });
  assert.deepEqual(dispatched(effects), [["r2", "w2"]]);
  assert.equal(ofKind(effects, "modelLoadStarted").length, 1);
});

Deno.test("the drain bound: a worker full of demand lets a model nobody holds load after modelDrainMax requests", () => {
  const s = newState({ modelDrainMax: 2 });
  addWorker(s, "w1", {
    models: ["a", "b"],
    maxConcurrent: 1,
    extensions: [EXTENSION_RESIDENCY],
  });
  report(s, "w1", ["a"]);
  addRequest(s, "a1", { model: "a" });
  addRequest(s, "b1", { model: "b" }); // nobody holds b: waits
  for (let i = 2; i <= 6; i++) addRequest(s, `a${i}`, { model: "a" });
  // a keeps demand: a2 and a3 go first (the bound), then b loads.
  const order: string[] = [];
  let last = "a1";
  for (let i = 0; i < 4; i++) {
    const d = dispatched(complete(s, "w1", last));
    assert.equal(d.length, 1);
    order.push(d[0]![0]);
    last = d[0]![0];
  }
  assert.deepEqual(order.slice(0, 3), ["a2", "a3", "b1"]);
});

Deno.test("a worker without residency keeps today's routing beside one that reports", () => {
  const s = newState();
  addWorker(s, "old", { models: ["a", "b"], maxConcurrent: 2 });
  addWorker(s, "new", {
    models: ["a", "b"],
    maxConcurrent: 2,
    extensions: [EXTENSION_RESIDENCY],
  });
  report(s, "new", ["b"]);
  // old counts as holding every model it acked.
  assert.deepEqual(routed(s, "r1", { model: "a" }), [["r1", "old"]]);
});

Deno.test("a worker leaving takes its residency with it", () => {
  const s = twoBoxes();
  report(s, "w1", ["a"]);
  assert.equal(s.residencyWorkers, 1);
  step(s, {
    kind: "workerDisconnected",
    atMs: 0,
    workerId: "w1",
    reason: "gone",
  });
  assert.equal(s.residencyWorkers, 0);
});

Deno.test("tenant turns and priorities still order the requests waiting for a hot worker", () => {
  const s = newState();
  addWorker(s, "w1", {
    models: ["a", "b"],
    maxConcurrent: 1,
    extensions: [EXTENSION_RESIDENCY],
  });
  report(s, "w1", ["a"]);
  addRequest(s, "first", { model: "a" });
  const arrive = (id: string, tenant: string, priority: "high" | "normal") =>
    step(s, { ...requestEvent(s, id, { model: "a" }), tenant, priority });
  arrive("t1-1", "t1", "normal");
  arrive("t1-2", "t1", "normal");
  arrive("t2-1", "t2", "normal");
  arrive("hi", "t3", "high");
  const order: string[] = [];
  let last = "first";
  for (let i = 0; i < 4; i++) {
    const d = dispatched(complete(s, "w1", last));
    assert.equal(d.length, 1);
    last = d[0]![0];
    order.push(last);
  }
  assert.deepEqual(order, ["hi", "t1-1", "t2-1", "t1-2"]);
});

Deno.test("a report keeps at most modelsPerWorkerMax names; times are kept only for listed models", () => {
  const s = newState({ modelsPerWorkerMax: 3 });
  addWorker(s, "w1", {
    models: ["a", "b"],
    maxConcurrent: 2,
    extensions: [EXTENSION_RESIDENCY],
  });
  report(s, "w1", ["a", "x1", "x2", "x3", "x4"], 8);
  assert.equal(worker(s, "w1").residency!.loaded.size, 3);
  addRequest(s, "r1", { model: "a" });
  complete(s, "w1", "r1");
  assert.deepEqual([...s.modelTimes.keys()], ["local\u0000a"]);
});

Deno.test("a request stops waiting for a busy hot worker once it has waited as long as a load takes", () => {
  const s = twoBoxes({ modelLoadMsAssumed: 5_000 }, 1);
  report(s, "w1", ["a"]);
  report(s, "w2", [], 1);
  addRequest(s, "r0", { model: "a" });
  s.nowMs = 1_000;
  complete(s, "w1", "r0", { atMs: 1_000 }); // a's service: 1 s
  addRequest(s, "long", { model: "a" }); // runs far longer than 1 s
  assert.deepEqual(routed(s, "r2", { model: "a" }), []);
  assert.deepEqual(dispatched(tick(s, 5_000)), []);
  const effects = tick(s, 6_000);
  assert.deepEqual(dispatched(effects), [["r2", "w2"]]);
  assert.equal(ofKind(effects, "modelLoadStarted")[0]!.model, "a");
});
