// Issue 24, item 4: a model whose only worker left (a rolling restart) is
// queued, not answered 404, while other workers are connected, for
// MODEL_GRACE_SECS; the queue timeout answers 504 if none comes back.
import assert from "node:assert/strict";
import {
  addRequest,
  addWorker,
  disconnect,
  dispatched,
  modelsUpdate,
  newState,
  only,
  queued,
  requestEvent,
  step,
  tick,
} from "../_testing.ts";

function restartGap(graceMs = 300_000) {
  const state = newState({
    modelGraceMs: graceMs,
    queueTimeoutMs: 30_000,
    heartbeatTimeoutMs: 1e9, // wb stays connected through the ticks
  });
  addWorker(state, "wa", { models: ["a"] });
  addWorker(state, "wb", { models: ["b"] });
  disconnect(state, "wa", 1_000);
  return state;
}

Deno.test("issue 24.4 no 404 in a rolling restart: a request for the model of a worker that just left is queued while another worker is connected, and dispatched when it returns", () => {
  const state = restartGap();
  const effects = addRequest(state, "r1", { model: "a", atMs: 2_000 });
  assert.equal(effects.filter((e) => e.kind === "respondError").length, 0);
  assert.deepEqual(queued(state), ["r1"]);
  const back = addWorker(state, "wa2", { models: ["a"], atMs: 5_000 });
  assert.deepEqual(dispatched(back), [["r1", "wa2"]]);
});

Deno.test("issue 24.4 a model kept waiting by the grace that never comes back answers 504 at the queue timeout", () => {
  const state = restartGap();
  addRequest(state, "r1", { model: "a", atMs: 2_000 });
  assert.equal(
    tick(state, 31_000).filter((e) => e.kind === "respondError").length,
    0,
  );
  const error = only(tick(state, 32_001), "respondError").error;
  assert.equal(error.status, 504);
});

Deno.test("issue 24.4 after MODEL_GRACE_SECS, or for a model no worker ever served, the answer is 404 at once", () => {
  const state = restartGap(60_000);
  assert.equal(
    only(
      addRequest(state, "never", { model: "zzz", atMs: 2_000 }),
      "respondError",
    )
      .error.status,
    404,
  );
  step(state, { kind: "tick", atMs: 61_001 });
  assert.equal(
    only(
      addRequest(state, "late", { model: "a", atMs: 61_001 }),
      "respondError",
    )
      .error.code,
    "model_not_found",
  );
});

Deno.test("issue 24.4 a model withdrawn by models_update (an original worker's drain) is in grace too", () => {
  const state = newState();
  addWorker(state, "wa", { models: ["a"] });
  addWorker(state, "wb", { models: ["b"] });
  step(state, modelsUpdate("wa", [], { atMs: 1, currentLoad: 0 }));
  addRequest(state, "r1", { model: "a", atMs: 2 });
  assert.deepEqual(queued(state), ["r1"]);
});

Deno.test("issue 24.4 the models remembered for the grace stay bounded: expired ones are swept once there are many", () => {
  const state = newState({ modelGraceMs: 1_000, heartbeatTimeoutMs: 1e9 });
  addWorker(state, "stay", { models: ["keep"] });
  for (let i = 0; i < 3_000; i++) {
    const id = `w${i}`;
    addWorker(state, id, { models: [`model-${i}`], atMs: i * 10 });
    disconnect(state, id, i * 10 + 5);
  }
  const gone = state.modelsGone.get("local")!;
  assert.ok(gone.size <= 1_024 + 200, `${gone.size} remembered`);
  assert.ok(gone.has("model-2999"));
});

Deno.test("issue 33 a model waiting out its grace holds at most a quarter of the queue: 100 requests for it leave room for another tenant's live model", () => {
  const state = newState({
    modelGraceMs: 300_000,
    queueTimeoutMs: 30_000,
    heartbeatTimeoutMs: 1e9,
    queueLenMax: 40,
    tenantQueueLenMax: 1000,
  });
  addWorker(state, "wa", { models: ["a"] });
  addWorker(state, "wb", { models: ["b"], maxConcurrent: 1 });
  disconnect(state, "wa", 1_000);
  const codes: number[] = [];
  for (let i = 0; i < 100; i++) {
    const effects = step(state, {
      ...requestEvent(state, `gone${i}`, { model: "a", atMs: 2_000 }),
      tenant: "t1",
    });
    for (const e of effects) {
      if (e.kind === "respondError") codes.push(e.error.status);
    }
  }
  // A quarter of QUEUE_LEN_MAX waits; the rest are told at once.
  assert.equal(queued(state).length, 10);
  assert.deepEqual(new Set(codes), new Set([503]));
  assert.equal(codes.length, 90);
  // The live model keeps the rest of the queue: its requests wait, none is refused.
  for (let i = 0; i < 25; i++) {
    const effects = step(state, {
      ...requestEvent(state, `live${i}`, { model: "b", atMs: 2_000 }),
      tenant: "t2",
    });
    assert.equal(
      effects.filter((e) => e.kind === "respondError").length,
      0,
      `live${i}`,
    );
  }
});
