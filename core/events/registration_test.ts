import assert from "node:assert/strict";
import {
  actions,
  addRequest,
  addWorker,
  chunk,
  connectEvent,
  dispatched,
  newState,
  ofKind,
  only,
  register,
  sent,
  step,
  tick,
  worker,
} from "../_testing.ts";

const attempt = connectEvent;

// ---- C2, C41: admission ------------------------------------------------------

Deno.test("C2 bad secret is rejected with close 1008 and counted against the client IP", () => {
  const state = newState();
  const effects = step(state, attempt("w1", { secretValid: false }));
  const reject = only(effects, "rejectWorker");
  assert.equal(reject.workerId, "w1");
  assert.equal(reject.code, 1008);
  assert.match(reject.reason, /secret/);
  assert.equal(ofKind(effects, "acceptWorker").length, 0);
  assert.equal(state.pending.size, 0);
  assert.equal(state.workers.size, 0);
  assert.deepEqual(state.authFailures.get("10.0.0.1"), [0]);
});

Deno.test("C2 unknown provider is rejected with close 1008 naming the known providers", () => {
  const state = newState();
  const effects = step(state, attempt("w1", { provider: "nope" }));
  const reject = only(effects, "rejectWorker");
  assert.equal(reject.code, 1008);
  assert.match(reject.reason, /unknown provider "nope"/);
  assert.match(reject.reason, /local/);
  assert.equal(state.pending.size, 0);
  assert.equal(state.authFailures.get("10.0.0.1")?.length, 1);
});

Deno.test("C2 disabled provider is rejected with close 1008", () => {
  const state = newState({
    providers: [{ name: "local", enabled: true }, {
      name: "off",
      enabled: false,
    }],
  });
  const effects = step(state, attempt("w1", { provider: "off" }));
  const reject = only(effects, "rejectWorker");
  assert.equal(reject.code, 1008);
  assert.equal(reject.reason, "Provider is currently disabled");
  assert.equal(state.pending.size, 0);
  // A disabled provider is not a guessing attempt: not counted.
  assert.equal(state.authFailures.size, 0);
});

Deno.test("C2 a valid secret and enabled provider is accepted and awaits register", () => {
  const state = newState();
  const effects = step(state, attempt("w1", { atMs: 5 }));
  assert.deepEqual(actions(effects), [{
    kind: "acceptWorker",
    workerId: "w1",
  }]);
  assert.deepEqual(state.pending.get("w1"), {
    id: "w1",
    provider: "local",
    connectedAtMs: 5,
    registerDeadlineAtMs: 5 + state.config.registerTimeoutMs,
  });
});

Deno.test("C2 repeated failed attempts from one IP are rate-limited, other IPs are not", () => {
  const state = newState({ authFailuresMax: 3, authFailureWindowMs: 60_000 });
  for (let i = 0; i < 3; i++) {
    step(state, attempt(`bad${i}`, { atMs: i * 1000, secretValid: false }));
  }
  assert.deepEqual(state.authFailures.get("10.0.0.1"), [0, 1000, 2000]);
  // The next bad attempt is refused with 1008 and a reason saying why.
  const effects = step(
    state,
    attempt("bad3", { atMs: 3000, secretValid: false }),
  );
  const reject = only(effects, "rejectWorker");
  assert.equal(reject.code, 1008);
  assert.match(reject.reason, /too many failed attempts/);
  // Refusals while limited do not extend the window.
  assert.deepEqual(state.authFailures.get("10.0.0.1"), [0, 1000, 2000]);
  // Another address is unaffected.
  const other = step(
    state,
    attempt("b", { atMs: 3000, clientIp: "10.0.0.2", secretValid: false }),
  );
  assert.match(only(other, "rejectWorker").reason, /invalid worker secret/);
});

Deno.test("issue 15 a correct secret is accepted from an address that strangers locked out", () => {
  const state = newState({ authFailuresMax: 3, authFailureWindowMs: 60_000 });
  for (let i = 0; i < 10; i++) {
    step(state, attempt(`bad${i}`, { atMs: i, secretValid: false }));
  }
  const effects = step(state, attempt("w1", { atMs: 20 }));
  assert.deepEqual(actions(effects), [{
    kind: "acceptWorker",
    workerId: "w1",
  }]);
  assert.equal(state.pending.has("w1"), true);
});

Deno.test("C2 failed-attempt entries expire after the window and are pruned on tick", () => {
  const state = newState({ authFailuresMax: 2, authFailureWindowMs: 60_000 });
  step(state, attempt("b1", { atMs: 0, secretValid: false }));
  step(state, attempt("b2", { atMs: 10_000, secretValid: false }));
  assert.match(
    only(
      step(state, attempt("b", { atMs: 59_000, secretValid: false })),
      "rejectWorker",
    )
      .reason,
    /too many/,
  );
  // At 60 001 ms the first failure left the window: one left, below the limit.
  const judged = step(
    state,
    attempt("b3", { atMs: 60_001, secretValid: false }),
  );
  assert.match(only(judged, "rejectWorker").reason, /invalid worker secret/);
  assert.deepEqual(state.authFailures.get("10.0.0.1"), [10_000, 60_001]);
  // A tick after the whole window removes the entry: memory does not grow.
  tick(state, 120_002);
  assert.equal(state.authFailures.has("10.0.0.1"), false);
  assert.equal(state.authFailures.size, 0);
});

// ---- C3: register / register_ack ---------------------------------------------

Deno.test("C3 register is answered by register_ack {worker_id, models, warnings, protocol_version}", () => {
  const state = newState();
  step(state, attempt("w1", { atMs: 1 }));
  const effects = step(
    state,
    register("w1", {
      atMs: 2,
      name: "gpu-box-1",
      models: ["llama3-8b", "qwen"],
      maxConcurrent: 3,
      protocolVersion: "1",
      currentLoad: 1,
    }),
  );
  const [ack] = sent(effects, "register_ack", "w1");
  assert.deepEqual(ack, {
    type: "register_ack",
    worker_id: "w1",
    models: ["llama3-8b", "qwen"],
    warnings: [],
    protocol_version: "1",
    to: "w1",
  });
  assert.equal(
    effects.filter((e) => e.kind === "log" && e.message === "worker registered")
      .length,
    1,
  );
  assert.equal(state.pending.size, 0);
  const w = worker(state, "w1");
  assert.equal(w.name, "gpu-box-1");
  assert.equal(w.provider, "local");
  assert.deepEqual(w.models, ["llama3-8b", "qwen"]);
  assert.equal(w.maxConcurrent, 3);
  assert.equal(w.reportedLoad, 1);
  assert.equal(w.connectedAtMs, 1);
  assert.equal(w.lastHeartbeatAtMs, 2);
  assert.equal(w.draining, false);
  assert.deepEqual(state.modelIndex.get("local")?.get("qwen"), new Set(["w1"]));
});

Deno.test("C3 a worker that never sends register is closed with 1002 after the register timeout", () => {
  const state = newState({ registerTimeoutMs: 10_000 });
  step(state, attempt("w1", { atMs: 0 }));
  assert.deepEqual(actions(tick(state, 9_999)), []);
  const effects = tick(state, 10_000);
  const close = only(effects, "closeWorker");
  assert.equal(close.code, 1002);
  assert.match(close.reason, /register/);
  assert.equal(state.pending.size, 0);
});

Deno.test("C3 a frame before register is a protocol error closing with 1002", () => {
  const state = newState();
  step(state, attempt("w1"));
  const effects = chunk(state, "w1", "r1", "data: x\n\n");
  const close = only(effects, "closeWorker");
  assert.equal(close.code, 1002);
  assert.match(close.reason, /register/);
  assert.equal(ofKind(effects, "writeChunk").length, 0);
  assert.equal(state.pending.size, 0);
  assert.equal(state.workers.size, 0);
});

Deno.test("C3 register sent twice on one connection is a protocol error", () => {
  const state = newState();
  addWorker(state, "w1");
  const effects = step(state, register("w1"));
  assert.equal(only(effects, "closeWorker").code, 1002);
  assert.equal(sent(effects, "register_ack").length, 0);
  assert.equal(state.workers.size, 0);
});

// ---- C4: sanitization ----------------------------------------------------------

Deno.test("C4 models are trimmed, empties dropped, duplicates dropped keeping first-seen order, each change warned", () => {
  const state = newState();
  const effects = addWorker(state, "w1", {
    models: [" b ", "a", "", "b", "   ", "c", "a", "\tc"],
  });
  const [ack] = sent(effects, "register_ack");
  assert.deepEqual(ack?.models, ["b", "a", "c"]);
  const warnings = ack?.warnings ?? [];
  assert.ok(warnings.some((w) => /"b".*trimmed/.test(w)), warnings.join("|"));
  assert.ok(warnings.some((w) => /"c".*trimmed/.test(w)), warnings.join("|"));
  assert.ok(warnings.some((w) => /2 empty/.test(w)), warnings.join("|"));
  assert.ok(warnings.some((w) => /3 duplicate/.test(w)), warnings.join("|"));
  const w = worker(state, "w1");
  assert.deepEqual(w.models, ["b", "a", "c"]);
  assert.deepEqual([...w.modelSet], ["b", "a", "c"]);
});

Deno.test("C4 the model list is capped at the provider limit with a warning; overlong names dropped", () => {
  const state = newState({ modelsPerWorkerMax: 2, modelNameCharsMax: 8 });
  const effects = addWorker(state, "w1", {
    models: ["a", "waytoolongname", "b", "c", "d"],
  });
  const [ack] = sent(effects, "register_ack");
  assert.deepEqual(ack?.models, ["a", "b"]);
  const warnings = ack?.warnings ?? [];
  assert.ok(
    warnings.some((w) => /only the first 2/.test(w)),
    warnings.join("|"),
  );
  assert.ok(
    warnings.some((w) => /14 characters dropped/.test(w)),
    warnings.join("|"),
  );
  assert.deepEqual(worker(state, "w1").models, ["a", "b"]);
  assert.equal(state.modelIndex.get("local")?.has("c"), false);
});

Deno.test("C4 clean input produces no warnings", () => {
  const state = newState();
  const [ack] = sent(
    addWorker(state, "w1", { models: ["a", "b"] }),
    "register_ack",
  );
  assert.deepEqual(ack?.warnings, []);
});

Deno.test("C4 worker_name is trimmed, bounded and never empty", () => {
  const state = newState({ workerNameCharsMax: 5 });
  const long = addWorker(state, "w1", { name: "  abcdefgh  " });
  assert.equal(worker(state, "w1").name, "abcde");
  assert.ok(
    sent(long, "register_ack")[0]?.warnings?.some((w) =>
      /worker_name truncated to 5/.test(w)
    ),
  );
  const empty = addWorker(state, "w2", { name: "   " });
  assert.equal(worker(state, "w2").name, "worker");
  assert.ok(
    sent(empty, "register_ack")[0]?.warnings?.some((w) =>
      /empty worker_name/.test(w)
    ),
  );
  const fine = addWorker(state, "w3", { name: " ok " });
  assert.equal(worker(state, "w3").name, "ok");
  assert.deepEqual(sent(fine, "register_ack")[0]?.warnings, []);
});

Deno.test("C4 max_concurrent is raised to at least 1 and capped, with warnings", () => {
  const state = newState({ maxConcurrentMax: 8 });
  const zero = addWorker(state, "w0", { maxConcurrent: 0 });
  assert.equal(worker(state, "w0").maxConcurrent, 1);
  assert.ok(
    sent(zero, "register_ack")[0]?.warnings?.some((w) => /raised to 1/.test(w)),
  );
  const neg = addWorker(state, "wn", { maxConcurrent: -5 });
  assert.equal(worker(state, "wn").maxConcurrent, 1);
  assert.ok(
    sent(neg, "register_ack")[0]?.warnings?.some((w) =>
      /-5 raised to 1/.test(w)
    ),
  );
  const big = addWorker(state, "wb", { maxConcurrent: 1_000_000 });
  assert.equal(worker(state, "wb").maxConcurrent, 8);
  assert.ok(
    sent(big, "register_ack")[0]?.warnings?.some((w) => /capped at 8/.test(w)),
  );
  const ok = addWorker(state, "wk", { maxConcurrent: 8 });
  assert.equal(worker(state, "wk").maxConcurrent, 8);
  assert.deepEqual(sent(ok, "register_ack")[0]?.warnings, []);
});

// ---- C5, C39: protocol version --------------------------------------------------

Deno.test('C39 protocol_version "1" and "2026-04-bridge-v1" are accepted and echoed in register_ack', () => {
  for (const version of ["1", "2026-04-bridge-v1"]) {
    const state = newState();
    const effects = addWorker(state, "w1", { protocolVersion: version });
    const [ack] = sent(effects, "register_ack", "w1");
    assert.equal(ack?.protocol_version, version);
    assert.equal(worker(state, "w1").protocolVersion, version);
    assert.equal(ofKind(effects, "closeWorker").length, 0);
  }
});

Deno.test("C5 a missing protocol_version is tolerated (legacy) and none is echoed", () => {
  const state = newState();
  const effects = addWorker(state, "w1", { protocolVersion: null });
  const ack = only(effects, "sendToWorker").message;
  assert.equal(ack.type, "register_ack");
  assert.equal("protocol_version" in ack, false);
  assert.equal(worker(state, "w1").protocolVersion, null);
});

Deno.test("C5 a missing protocol_version is closed with 1002 when requireProtocolVersion is set", () => {
  const state = newState({ requireProtocolVersion: true });
  const effects = addWorker(state, "w1", { protocolVersion: null });
  const close = only(effects, "closeWorker");
  assert.equal(close.code, 1002);
  assert.match(close.reason, /protocol_version is required/);
  assert.match(close.reason, /"1"/);
  assert.match(close.reason, /"2026-04-bridge-v1"/);
  assert.equal(sent(effects, "register_ack").length, 0);
  assert.equal(state.workers.size, 0);
  assert.equal(state.pending.size, 0);
  // With the setting, versioned workers are still fine.
  addWorker(state, "w2", { protocolVersion: "1" });
  assert.equal(state.workers.has("w2"), true);
});

Deno.test("C39 any other protocol_version is closed with 1002 naming the accepted versions", () => {
  for (const version of ["2", "", "2026-04-bridge-v2", " 1"]) {
    const state = newState();
    const effects = addWorker(state, "w1", { protocolVersion: version });
    const close = only(effects, "closeWorker");
    assert.equal(close.workerId, "w1");
    assert.equal(close.code, 1002);
    assert.match(close.reason, /"1"/);
    assert.match(close.reason, /"2026-04-bridge-v1"/);
    assert.equal(sent(effects, "register_ack").length, 0);
    assert.equal(state.workers.size, 0);
    assert.equal(state.pending.size, 0);
  }
});

Deno.test("C39 a rejected version never receives work even with requests queued", () => {
  const state = newState();
  addRequest(state, "r1");
  const effects = addWorker(state, "w1", { protocolVersion: "9" });
  assert.deepEqual(dispatched(effects), []);
  assert.equal(state.requests.get("r1")?.status.kind, "queued");
});
