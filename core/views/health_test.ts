import assert from "node:assert/strict";
import {
  addRequest,
  addWorker,
  drainRequested,
  newState,
  step,
} from "../_testing.ts";
import { EXTENSION_CAPABILITIES } from "../protocol/messages.ts";
import type { State } from "../state/state.ts";
import { fleetHealth, healthAnswer, queueSaturated } from "./health.ts";

Deno.test("the queue is saturated from 90% of its bound, and never at zero", () => {
  const state = newState({ queueLenMax: 10 });
  for (let i = 0; i < 8; i++) addRequest(state, `r${i}`);
  assert.equal(queueSaturated(state), false);
  addRequest(state, "r8");
  assert.equal(queueSaturated(state), true);
  assert.equal(queueSaturated(newState({ queueLenMax: 0 })), false);
});

Deno.test("health answers 200 ok with no worker, with a warning saying so", () => {
  const answer = healthAnswer(newState(), "9.9.9", 12_345);
  assert.equal(answer.status, 200);
  assert.equal(answer.body.status, "ok");
  assert.equal(answer.body.version, "9.9.9");
  assert.equal(answer.body.uptime_secs, 12.3);
  assert.deepEqual(answer.body.warnings, ["no worker connected"]);
  assert.equal("problems" in answer.body, false);
});

Deno.test("health answers 503 with the problem when the queue is saturated", () => {
  const state = newState({ queueLenMax: 2 });
  addRequest(state, "r1");
  addRequest(state, "r2");
  const answer = healthAnswer(state, "v", 0);
  assert.equal(answer.status, 503);
  assert.equal(answer.body.status, "unavailable");
  assert.deepEqual(answer.body.problems, ["queue saturated (2 waiting)"]);
});

Deno.test("health says shutting_down with 503 once shutdown was requested", () => {
  const state = newState();
  addWorker(state, "w1");
  step(state, { kind: "shutdownRequested", atMs: 0 });
  const answer = healthAnswer(state, "v", 0);
  assert.equal(answer.status, 503);
  assert.equal(answer.body.status, "shutting_down");
});

/** One worker, busy (so the drain keeps it connected) and draining. */
function everyWorkerDraining(): State {
  const state = newState();
  addWorker(state, "w1");
  addRequest(state, "r1");
  step(state, drainRequested("w1", "test"));
  return state;
}

Deno.test("health warns when every worker is draining, and counts routable workers", () => {
  const state = everyWorkerDraining();
  const answer = healthAnswer(state, "v", 0);
  assert.equal(answer.body.workers_connected, 1);
  assert.equal(answer.body.workers_routable, 0);
  assert.deepEqual(answer.body.warnings, ["every worker is draining"]);
});

Deno.test("fleet health: unhealthy with no worker, degraded by a saturated queue", () => {
  const state = newState({ queueLenMax: 1 });
  assert.equal(fleetHealth(state, []), "unhealthy");
  addWorker(state, "w1", { maxConcurrent: 1 });
  const workers = [...state.workers.values()];
  addRequest(state, "r1");
  assert.equal(fleetHealth(state, workers), "healthy");
  addRequest(state, "r2");
  assert.equal(queueSaturated(state), true);
  assert.equal(fleetHealth(state, workers), "degraded");
});

Deno.test("fleet health follows the workers' own reports", () => {
  const state = newState();
  for (const workerId of ["w1", "w2"]) {
    addWorker(state, workerId, { extensions: [EXTENSION_CAPABILITIES] });
  }
  const report = (workerId: string, health: string) =>
    step(state, {
      kind: "capabilitiesReceived",
      atMs: 0,
      workerId,
      capabilities: { health },
    });
  const workers = () => [...state.workers.values()];
  report("w1", "unhealthy");
  assert.equal(fleetHealth(state, workers()), "degraded");
  report("w2", "loading");
  assert.equal(fleetHealth(state, workers()), "unhealthy");
});

Deno.test("fleet health is unhealthy while every worker drains", () => {
  const state = everyWorkerDraining();
  assert.equal(fleetHealth(state, [...state.workers.values()]), "unhealthy");
});

Deno.test("cluster mode: /health is 503 while this instance cannot reach the shared log, and says so", () => {
  const state = newState();
  const down = healthAnswer(state, "v", 0, {
    up: false,
    instance: "i1",
    instances: 3,
  });
  assert.equal(down.status, 503);
  assert.deepEqual(down.body.problems, ["relay cluster unavailable"]);
  assert.deepEqual(down.body.cluster, {
    up: false,
    instance: "i1",
    instances: 3,
  });
  const up = healthAnswer(state, "v", 0, {
    up: true,
    instance: "i1",
    instances: 3,
  });
  assert.equal(up.status, 200);
  assert.deepEqual(up.body.cluster, { up: true, instance: "i1", instances: 3 });
  // A single instance has no cluster field at all.
  assert.equal("cluster" in healthAnswer(state, "v", 0).body, false);
});
