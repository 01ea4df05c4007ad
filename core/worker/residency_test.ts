// Issue 30: the worker's residency reports (residency-v1).
import assert from "node:assert/strict";
import {
  type BackendResidency,
  RESIDENCY_GAP_MS,
  residencyFrame,
  startActions,
  step,
  type WorkerAction,
  type WorkerState,
} from "./mod.ts";
import {
  backendFinished,
  frame,
  fresh,
  registeredWith,
  requestFrame,
} from "./_testing.ts";

const sentFrames = (actions: WorkerAction[]) =>
  actions.flatMap((a) => a.kind === "send" ? [a.message] : []);
const probes = (actions: WorkerAction[]) =>
  actions.filter((a) => a.kind === "probeResidency").length;

function read(
  s: WorkerState,
  residency: BackendResidency | null,
): WorkerAction[] {
  return step(s, { atMs: 0, kind: "residencyRead", residency });
}

const ollama = (loaded: string[]): BackendResidency => ({
  loaded,
  loading: [],
  room: null,
  swaps: true,
});

Deno.test("a worker reads residency after register_ack only when the server took residency-v1", () => {
  const s = fresh();
  step(s, { atMs: 0, kind: "socketOpened" });
  const ours = step(
    s,
    frame({
      type: "register_ack",
      worker_id: "w1",
      models: ["m"],
      extensions: ["residency-v1"],
    }),
  );
  assert.equal(probes(ours), 1);
  const original = fresh();
  step(original, { atMs: 0, kind: "socketOpened" });
  assert.equal(
    probes(step(
      original,
      frame({ type: "register_ack", worker_id: "w1", models: ["m"] }),
    )),
    0,
  );
});

Deno.test("a swapping backend's residency is sent with room 1, and only when it changed", () => {
  const s = registeredWith(["residency-v1"]);
  assert.deepEqual(sentFrames(read(s, ollama(["a"]))), [
    { type: "residency", loaded: ["a"], loading: [], room: 1 },
  ]);
  assert.deepEqual(sentFrames(read(s, ollama(["a"]))), []);
  assert.deepEqual(sentFrames(read(s, ollama(["b"]))), [
    { type: "residency", loaded: ["b"], loading: [], room: 1 },
  ]);
});

Deno.test("room is MAX_RESIDENT_MODELS when set, else never fewer than the backend holds", () => {
  const s = registeredWith(["residency-v1"], { maxResidentModels: 3 });
  assert.equal(residencyFrame(s, ollama(["a"]))!.room, 3);
  const t = registeredWith(["residency-v1"]);
  assert.equal(residencyFrame(t, ollama(["a", "b"]))!.room, 2);
  // A backend that does not swap (one llama-server) has no limit to report.
  assert.equal(
    residencyFrame(t, { loaded: ["m"], loading: [], room: null, swaps: false })!
      .room,
    null,
  );
});

Deno.test("where the backend says nothing, the worker reports what it last served, only with MAX_RESIDENT_MODELS", () => {
  const silent: BackendResidency = {
    loaded: null,
    loading: [],
    room: null,
    swaps: false,
  };
  const plain = registeredWith(["residency-v1"]);
  assert.equal(residencyFrame(plain, silent), null);
  const s = registeredWith(["residency-v1"], {
    maxResidentModels: 1,
    models: ["a", "b"],
  });
  for (const [id, model] of [["r1", "a"], ["r2", "b"]]) {
    step(s, requestFrame(id!, { model: model! }));
    step(s, backendFinished(id!, "{}"));
  }
  assert.deepEqual(residencyFrame(s, silent), {
    loaded: ["b"],
    loading: [],
    room: 1,
  });
});

Deno.test("an answer asks for one read; asks during a read fold into one more after it", () => {
  const s = registeredWith(["residency-v1"]);
  // The read asked by register_ack is under way.
  const request = (id: string) => requestFrame(id);
  const done = (id: string) => step(s, backendFinished(id, "{}"));
  step(s, request("r1"));
  step(s, request("r2"));
  assert.equal(probes(done("r1")), 0);
  assert.equal(probes(done("r2")), 0);
  // The folded read waits RESIDENCY_GAP_MS on the residency timer, however
  // many answers come meanwhile.
  const after = read(s, ollama(["m"]));
  assert.equal(probes(after), 0);
  assert.deepEqual(after.filter((a) => a.kind === "armTimer"), [
    { kind: "armTimer", timer: "residency", ms: RESIDENCY_GAP_MS },
  ]);
  step(s, request("r3"));
  assert.equal(probes(done("r3")), 0);
  assert.equal(probes(step(s, { atMs: 1_000, kind: "residencyDue" })), 1);
  assert.equal(probes(read(s, ollama(["m"]))), 0);
  // Idle again: the next answer reads at once.
  step(s, request("r4"));
  assert.equal(probes(done("r4")), 1);
});

Deno.test("only a worker that speaks residency-v1 arms the residency timer", () => {
  const timers = (s: WorkerState) =>
    startActions(s).flatMap((a) => a.kind === "armTimer" ? [a.timer] : []);
  assert.ok(timers(fresh()).includes("residency"));
  assert.ok(
    !timers(fresh({ speaks: ["capabilities-v1"] })).includes("residency"),
  );
  assert.ok(!timers(fresh({ speaks: null })).includes("residency"));
});
