import assert from "node:assert/strict";
import {
  addRequest,
  addWorker,
  complete,
  dispatched,
  newState,
  only,
  pong,
  queued,
  routed,
  statusOf,
  step,
  worker,
} from "../_testing.ts";
import { listModels } from "../queries.ts";
import { pickWorker } from "./routing.ts";

// ---- C6, C7: eligibility ------------------------------------------------------

Deno.test("C6 routing uses the acked (sanitized) model set only", () => {
  const state = newState({ modelsPerWorkerMax: 2 });
  addWorker(state, "w1", { models: [" a ", "b", "c"] });
  assert.deepEqual(worker(state, "w1").models, ["a", "b"]);
  // The acked, trimmed name routes.
  assert.deepEqual(routed(state, "r1", { model: "a" }), [["r1", "w1"]]);
  // Neither the raw advertised spelling nor a model cut by the cap does.
  for (const model of [" a ", "c"]) {
    const effects = addRequest(state, `x${model}`, { model });
    assert.deepEqual(dispatched(effects), []);
    assert.equal(only(effects, "respondError").error.status, 404);
    assert.equal(state.requests.has(`x${model}`), false);
  }
  assert.deepEqual([...worker(state, "w1").inFlight], ["r1"]);
});

Deno.test("C7 only workers that acked the exact model are eligible", () => {
  const state = newState();
  addWorker(state, "wa", { models: ["llama3"] });
  addWorker(state, "wb", { models: ["llama3-8b"] });
  assert.deepEqual(routed(state, "r1", { model: "llama3-8b" }), [["r1", "wb"]]);
  assert.deepEqual(routed(state, "r2", { model: "llama3" }), [["r2", "wa"]]);
  assert.equal(pickWorker(state, "local", "LLAMA3"), null);
  assert.deepEqual([...worker(state, "wa").inFlight], ["r2"]);
  assert.deepEqual([...worker(state, "wb").inFlight], ["r1"]);
});

Deno.test("C7 a draining worker is not eligible", () => {
  // w1 holds a request so that draining keeps it connected.
  const s2 = newState();
  addWorker(s2, "w1", { models: ["m"] });
  addWorker(s2, "w2", { models: ["m"], currentLoad: 3 });
  addRequest(s2, "r0");
  assert.deepEqual([...worker(s2, "w1").inFlight], ["r0"]);
  step(s2, {
    kind: "workerDrainRequested",
    atMs: 0,
    workerId: "w1",
    reason: "op",
  });
  assert.equal(worker(s2, "w1").draining, true);
  // w1 has the lower load but drains: w2 gets the work.
  assert.deepEqual(routed(s2, "r1"), [["r1", "w2"]]);
  assert.deepEqual([...worker(s2, "w1").inFlight], ["r0"]);
  // With only draining workers left for the model, requests queue.
  const s3 = newState();
  addWorker(s3, "w1", { models: ["m"] });
  addRequest(s3, "r0");
  step(s3, {
    kind: "workerDrainRequested",
    atMs: 0,
    workerId: "w1",
    reason: "op",
  });
  assert.deepEqual(routed(s3, "r1"), []);
  assert.equal(statusOf(s3, "r1"), "queued");
});

Deno.test("C7 a worker without free capacity is not eligible", () => {
  const state = newState();
  addWorker(state, "w1", { models: ["m"], maxConcurrent: 1 });
  assert.deepEqual(routed(state, "r1"), [["r1", "w1"]]);
  assert.deepEqual(routed(state, "r2"), []);
  assert.equal(statusOf(state, "r2"), "queued");
  assert.deepEqual(queued(state), ["r2"]);
  assert.equal(worker(state, "w1").inFlight.size, 1);
});

// ---- C8: choice and reservation --------------------------------------------------

Deno.test("C8 the lowest-load worker is chosen", () => {
  const state = newState();
  addWorker(state, "w1", { maxConcurrent: 8, currentLoad: 3 });
  addWorker(state, "w2", { maxConcurrent: 8, currentLoad: 1 });
  addWorker(state, "w3", { maxConcurrent: 8, currentLoad: 2 });
  assert.deepEqual(routed(state, "r1"), [["r1", "w2"]]);
  // w2 now at 1 reported, 1 reserved: still load 1, still lowest.
  assert.deepEqual(routed(state, "r2"), [["r2", "w2"]]);
  // w2 at 2 ties w3 at 2; w3 has never been dispatched to, so it goes first.
  assert.deepEqual(routed(state, "r3"), [["r3", "w3"]]);
  assert.deepEqual([...worker(state, "w2").inFlight], ["r1", "r2"]);
  assert.deepEqual([...worker(state, "w3").inFlight], ["r3"]);
  assert.equal(worker(state, "w1").inFlight.size, 0);
});

Deno.test("C8 ties are broken round-robin", () => {
  const state = newState();
  addWorker(state, "w1", { maxConcurrent: 10 });
  addWorker(state, "w2", { maxConcurrent: 10 });
  addWorker(state, "w3", { maxConcurrent: 10 });
  const order: string[] = [];
  for (let i = 0; i < 6; i++) {
    const [[id, w] = ["", ""]] = routed(state, `r${i}`);
    order.push(w);
    // Finish at once so every worker is back at load 0: a pure tie each time.
    complete(state, w, id);
  }
  assert.deepEqual(order, ["w1", "w2", "w3", "w1", "w2", "w3"]);
  assert.equal(state.requests.size, 0);
  for (const id of ["w1", "w2", "w3"]) {
    assert.equal(worker(state, id).inFlight.size, 0);
  }
});

Deno.test("C8 capacity is reserved at dispatch: in-flight never exceeds max_concurrent", () => {
  const state = newState({ queueLenMax: 100 });
  addWorker(state, "w1", { maxConcurrent: 2 });
  addWorker(state, "w2", { maxConcurrent: 3 });
  const sentTo: Record<string, number> = { w1: 0, w2: 0 };
  for (let i = 0; i < 10; i++) {
    for (const [, w] of routed(state, `r${i}`)) sentTo[w]!++;
  }
  assert.deepEqual(sentTo, { w1: 2, w2: 3 });
  assert.equal(worker(state, "w1").inFlight.size, 2);
  assert.equal(worker(state, "w2").inFlight.size, 3);
  assert.equal(queued(state).length, 5);
  // One completion frees exactly one slot: exactly one queued request moves.
  const effects = complete(state, "w1", "r0");
  assert.deepEqual(dispatched(effects), [["r5", "w1"]]);
  assert.equal(worker(state, "w1").inFlight.size, 2);
  assert.equal(queued(state).length, 4);
});

Deno.test("C8 live load reported in pong caps dispatch", () => {
  const state = newState();
  addWorker(state, "w1", { maxConcurrent: 2 });
  pong(state, "w1", 2, 1);
  assert.equal(worker(state, "w1").reportedLoad, 2);
  assert.equal(worker(state, "w1").lastHeartbeatAtMs, 1);
  // Nothing of ours runs there, but the worker says it is full.
  assert.deepEqual(routed(state, "r1"), []);
  assert.equal(statusOf(state, "r1"), "queued");
  // A pong with a lower load frees the slot and drains the queue.
  const effects = pong(state, "w1", 1, 2);
  assert.deepEqual(dispatched(effects), [["r1", "w1"]]);
  assert.equal(worker(state, "w1").inFlight.size, 1);
  // Load now max(1 reserved, 1 reported) = 1 < 2: one more fits, then full.
  assert.deepEqual(routed(state, "r2"), [["r2", "w1"]]);
  assert.deepEqual(routed(state, "r3"), []);
  // A pong without load only refreshes the heartbeat.
  pong(state, "w1", null, 3);
  assert.equal(worker(state, "w1").lastHeartbeatAtMs, 3);
  assert.equal(worker(state, "w1").reportedLoad, 1);
});

Deno.test("C8 a heavier reported load steers work to the other worker", () => {
  const state = newState();
  addWorker(state, "w1", { maxConcurrent: 4 });
  addWorker(state, "w2", { maxConcurrent: 4 });
  pong(state, "w1", 3);
  assert.deepEqual(routed(state, "r1"), [["r1", "w2"]]);
});

// ---- C42: wildcard ---------------------------------------------------------------

Deno.test("C42 a * worker serves any model", () => {
  const state = newState();
  const effects = addWorker(state, "w1", { models: ["*"] });
  assert.equal(worker(state, "w1").wildcard, true);
  assert.equal(worker(state, "w1").modelSet.size, 0);
  assert.deepEqual(effects.filter((e) => e.kind === "respondError"), []);
  assert.deepEqual(routed(state, "r1", { model: "anything" }), [
    ["r1", "w1"],
  ]);
  assert.deepEqual(routed(state, "r2", { model: "else" }), [["r2", "w1"]]);
  assert.deepEqual([...worker(state, "w1").inFlight], ["r1", "r2"]);
});

Deno.test("C42 exact matches are preferred over * even when more loaded", () => {
  const state = newState();
  addWorker(state, "wild", { models: ["*"], maxConcurrent: 4 });
  addWorker(state, "exact", {
    models: ["m"],
    maxConcurrent: 2,
    currentLoad: 1,
  });
  // exact reports load 1, wild 0: exact still wins.
  assert.deepEqual(routed(state, "r1", { model: "m" }), [["r1", "exact"]]);
  assert.deepEqual(routed(state, "r2", { model: "m" }), [["r2", "exact"]]);
  // exact is now full (2 reserved): the wildcard takes the overflow.
  assert.deepEqual(routed(state, "r3", { model: "m" }), [["r3", "wild"]]);
  assert.deepEqual([...worker(state, "exact").inFlight], ["r1", "r2"]);
  assert.deepEqual([...worker(state, "wild").inFlight], ["r3"]);
});

Deno.test("C42 * is never listed by listModels", () => {
  const state = newState();
  addWorker(state, "w1", { models: ["*", "a"] });
  addWorker(state, "w2", { models: ["b", "a", "*"] });
  assert.deepEqual(listModels(state), ["a", "b"]);
  assert.deepEqual(worker(state, "w1").models, ["*", "a"]);
});

// ---- C210, C211: the load buckets behind the round-robin -------------------

Deno.test("C210 a worker that fills up stays known to its buckets, and leaving for good forgets it", () => {
  const state = newState();
  addWorker(state, "w1", { models: ["m"], maxConcurrent: 1 });
  addWorker(state, "w2", { models: ["m"], maxConcurrent: 1 });
  const b = state.routes.get("local")!.get("m")!;
  assert.deepEqual(routed(state, "r1", { model: "m" }), [["r1", "w1"]]);
  // Full: out of every level (w2 goes first), but its node is kept, so coming
  // back relinks it instead of re-adding a key to the bucket's Map.
  assert.equal(worker(state, "w1").routeLevel, null);
  assert.deepEqual([...b.nodes.keys()], ["w1", "w2"]);
  assert.equal(pickWorker(state, "local", "m")?.id, "w2");
  complete(state, "w1", "r1");
  // Back at level 0, behind w2, which has waited there longer (C211).
  assert.deepEqual([...b.nodes.keys()], ["w1", "w2"]);
  assert.deepEqual(routed(state, "r2", { model: "m" }), [["r2", "w2"]]);
  step(state, {
    kind: "workerDisconnected",
    atMs: state.nowMs,
    workerId: "w1",
    reason: "gone",
  });
  assert.deepEqual([...b.nodes.keys()], ["w2"]);
});
