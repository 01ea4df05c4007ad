// Issue 30 with issue 14: a request a worker sent back before any byte
// (`backend_unavailable`) avoids that worker. With residency, when that worker
// holds the model, the request goes to another worker that holds or loads
// it, waits for one, or else goes back: never a load elsewhere for one
// refusal (hot first), never a wait for a worker that merely lists the model.
// Found by e2e/models_fleet_test.ts with two real llama-server routers (a
// router hung up; the request timed out queued). docs/decisions.md C220-C221.
import assert from "node:assert/strict";
import {
  addRequest,
  complete,
  dispatched,
  ofKind,
  queued,
  reportResidency,
  residencyBoxes,
  routed,
  step,
  worker,
} from "../_testing.ts";
import type { Effect } from "../effect.ts";
import type { State } from "./state.ts";

const report = reportResidency;

function fleet(maxConcurrent = 4): State {
  return residencyBoxes({ queueTimeoutMs: 30_000 }, maxConcurrent);
}

/** w1 holds a, w2 holds b, room 1 each; r1 (a) went to w1. */
function aOnW1(): State {
  const s = fleet();
  report(s, "w1", ["a"], 1);
  report(s, "w2", ["b"], 1);
  assert.deepEqual(routed(s, "r1", { model: "a", atMs: 10 }), [
    ["r1", "w1"],
  ]);
  return s;
}

function backendUnavailable(s: State, workerId: string, id: string): Effect[] {
  return step(s, {
    kind: "workerErrorReceived",
    atMs: s.nowMs,
    workerId,
    requestId: id,
    code: "backend_unavailable",
    message: "socket hang up",
  });
}

Deno.test("a request its only holder sent back goes back to it at once while the other worker's model is busy, instead of waiting until its queue timeout", () => {
  const s = aOnW1();
  addRequest(s, "rb", { model: "b", atMs: 20 }); // w2's model is busy
  const effects = backendUnavailable(s, "w1", "r1");
  assert.deepEqual(dispatched(effects), [["r1", "w1"]]);
  assert.deepEqual(ofKind(effects, "modelLoadStarted"), []);
  assert.equal(s.requests.get("r1")!.requeueCount, 1);
});

Deno.test("a request its only holder sent back goes back to it rather than start a load on an idle other worker (hot first)", () => {
  const s = aOnW1();
  const effects = backendUnavailable(s, "w1", "r1");
  assert.deepEqual(dispatched(effects), [["r1", "w1"]]);
  assert.deepEqual(ofKind(effects, "modelLoadStarted"), []);
});

Deno.test("a request refused three times opens its holder's backend circuit, then loads on the other worker", () => {
  const s = aOnW1();
  for (let i = 1; i <= 2; i++) {
    assert.deepEqual(
      dispatched(backendUnavailable(s, "w1", "r1")),
      [["r1", "w1"]],
      `refusal ${i}`,
    );
  }
  const third = backendUnavailable(s, "w1", "r1");
  assert.equal(worker(s, "w1").backend.kind, "open");
  assert.deepEqual(dispatched(third), [["r1", "w2"]]);
  const load = ofKind(third, "modelLoadStarted");
  assert.equal(load[0]!.workerId, "w2");
  assert.equal(load[0]!.evicting, "b");
});

Deno.test("a request its holder sent back waits for another worker holding the model (issue 14)", () => {
  const s = fleet(1);
  report(s, "w1", ["a"], 2);
  report(s, "w2", ["a", "b"], 2);
  addRequest(s, "r1", { model: "a" });
  addRequest(s, "r2", { model: "a" });
  assert.deepEqual(dispatched(backendUnavailable(s, "w1", "r1")), []);
  assert.deepEqual(queued(s), ["r1"]);
  assert.deepEqual(dispatched(complete(s, "w2", "r2")), [["r1", "w2"]]);
});

Deno.test("a request refused by a worker loading its model (a failed AUTO_LOAD) loads on another worker at once", () => {
  // w1 does not hold a, so the load it was doing is not waited for (its
  // slots do not count for a request that avoids it) and nothing goes back.
  const s = fleet();
  report(s, "w1", [], 1);
  report(s, "w2", [], 1);
  assert.deepEqual(routed(s, "r1", { model: "a" }), [["r1", "w1"]]);
  const effects = backendUnavailable(s, "w1", "r1");
  assert.deepEqual(dispatched(effects), [["r1", "w2"]]);
  assert.equal(ofKind(effects, "modelLoadStarted")[0]!.workerId, "w2");
});
