import assert from "node:assert/strict";
import { connectActions, step, type WorkerAction } from "./mod.ts";
import {
  AUTH_RETRY_MS,
  BACKOFF_MAX_MS,
  backoffMs,
  RETRY_SOON_MAX_MS,
} from "./backoff.ts";
import { IDLE_TIMEOUT_MS, REGISTER_ACK_TIMEOUT_MS } from "./link_limits.ts";
import {
  backendFinished,
  frame,
  fresh,
  registered,
  registeredWith,
  socketClosed,
} from "./_testing.ts";

function sent(actions: WorkerAction[]) {
  return actions.flatMap((a) => a.kind === "send" ? [a.message] : []);
}

/** Action kinds, without logs and the idle watchdog's re-arming (tested on its own). */
function kinds(actions: WorkerAction[]) {
  return actions.filter((a) =>
    a.kind !== "log" && !(a.kind === "armTimer" && a.timer === "idle")
  ).map((a) => a.kind);
}

const request = (id: string) => ({
  type: "request",
  request_id: id,
  model: "m",
  endpoint_path: "/v1/chat/completions",
  is_streaming: true,
  body: "{}",
});

Deno.test("backoff doubles from 1 s to a 30 s cap plus under 500 ms of jitter", () => {
  assert.equal(backoffMs(0, 0), 1_000);
  assert.equal(backoffMs(1, 0), 2_000);
  assert.equal(backoffMs(4, 0), 16_000);
  assert.equal(backoffMs(5, 0), 30_000);
  assert.equal(backoffMs(500, 0), 30_000);
  assert.equal(backoffMs(0, 0.5), 1_250);
  assert.equal(backoffMs(0, 0.999_999_9), 1_499);
});

Deno.test("opening the socket registers with the bridge protocol version and current load", () => {
  const s = fresh();
  const [reg] = sent(step(s, { atMs: 0, kind: "socketOpened" }));
  assert.deepEqual(reg, {
    type: "register",
    worker_name: "w",
    models: ["m"],
    max_concurrent: 2,
    protocol_version: "2026-04-bridge-v1",
    current_load: 0,
    // Added field (issue 9); the original server ignores unknown fields.
    extensions: [
      "capabilities-v1",
      "lifecycle-v1",
      "drain-v1",
      "body-chunks-v1",
      "chunk-bytes-v1",
      "body-bytes-v1",
      "stream-head-v1",
      "residency-v1",
    ],
  });
});

Deno.test("a request is forwarded and counts as load in the next pong", () => {
  const s = registered();
  assert.deepEqual(kinds(step(s, frame(request("r1")))), ["forward"]);
  const [pong] = sent(step(s, frame({ type: "ping", timestamp_unix_ms: 7 })));
  assert.deepEqual(pong, {
    type: "pong",
    current_load: 1,
    timestamp_unix_ms: 7,
  });
});

Deno.test("C44 cancel aborts the backend call, answers 499 and drops later chunks", () => {
  const s = registered();
  step(s, frame(request("r1")));
  const actions = step(
    s,
    frame({ type: "cancel", request_id: "r1", reason: { other: "x" } }),
  );
  assert.deepEqual(kinds(actions), ["abortBackend", "send"]);
  assert.deepEqual(sent(actions), [{
    type: "response_complete",
    request_id: "r1",
    status_code: 499,
    body: "",
  }]);
  assert.deepEqual(
    step(s, {
      atMs: 0,
      kind: "chunkRead",
      requestId: "r1",
      chunk: "data: x\n\n",
    }),
    [],
  );
  assert.deepEqual(
    step(s, backendFinished("r1")),
    [],
  );
  assert.equal(s.inFlight.size, 0);
});

Deno.test("the first signal advertises no models and waits; the last answer closes 1000 and exits 0", () => {
  const s = registered();
  step(s, frame(request("r1")));
  const first = step(s, { atMs: 0, kind: "shutdownSignalled" });
  assert.deepEqual(sent(first), [{
    type: "models_update",
    models: [],
    current_load: 1,
  }]);
  assert.ok(
    first.some((a) =>
      a.kind === "armTimer" && a.timer === "drain" && a.ms === 30_000
    ),
  );
  const refused = sent(step(s, frame(request("r2"))));
  assert.equal(refused[0]?.type, "response_complete");
  assert.equal((refused[0] as { status_code: number }).status_code, 503);
  const last = step(s, backendFinished("r1"));
  assert.deepEqual(kinds(last), ["send", "closeSocket", "exit"]);
  assert.deepEqual(last.find((a) => a.kind === "exit"), {
    kind: "exit",
    code: 0,
    graceful: true,
  });
});

Deno.test("a second signal exits at once", () => {
  const s = registered();
  step(s, frame(request("r1")));
  step(s, { atMs: 0, kind: "shutdownSignalled" });
  const second = step(s, { atMs: 0, kind: "shutdownSignalled" });
  assert.deepEqual(kinds(second), ["abortBackend", "exit"]);
  assert.deepEqual(second.at(-1), { kind: "exit", code: 1, graceful: false });
});

Deno.test("the drain timeout abandons in-flight work and exits 0", () => {
  const s = registered();
  step(s, frame(request("r1")));
  step(s, { atMs: 0, kind: "shutdownSignalled" });
  assert.deepEqual(kinds(step(s, { atMs: 0, kind: "drainTimerFired" })), [
    "abortBackend",
    "closeSocket",
    "exit",
  ]);
});

Deno.test("an unexpected close aborts in-flight work and schedules a backoff reconnect", () => {
  const s = registered();
  step(s, frame(request("r1")));
  const a = step(s, socketClosed(1006));
  assert.deepEqual(kinds(a), ["abortBackend", "armTimer"]);
  assert.ok(a.some((x) => x.kind === "armTimer" && x.ms === 1_000));
  const b = step(s, socketClosed(1006, { wasOpen: false }));
  assert.ok(b.some((x) => x.kind === "armTimer" && x.ms === 2_000));
  assert.deepEqual(kinds(step(s, { atMs: 0, kind: "reconnectTimerFired" })), [
    "connect",
    "armTimer",
  ]);
});

Deno.test("a connect attempt that gets no register_ack in time is cut, dialling or open, and retried; a registered one is left alone", () => {
  const s = fresh();
  const dial = connectActions(s);
  assert.deepEqual(dial, [
    { kind: "connect" },
    { kind: "armTimer", timer: "handshake", ms: REGISTER_ACK_TIMEOUT_MS },
  ]);
  // Still dialling (the proxy never answered the upgrade).
  assert.deepEqual(kinds(step(s, { atMs: 0, kind: "handshakeTimerFired" })), [
    "dropSocket",
  ]);
  const closed = step(s, socketClosed(1006, { wasOpen: false }));
  assert.ok(
    closed.some((a) => a.kind === "armTimer" && a.timer === "reconnect"),
  );
  // A timer of an attempt that already closed finds nothing to do.
  assert.deepEqual(step(s, { atMs: 0, kind: "handshakeTimerFired" }), []);
  // Open, register sent, no ack.
  step(s, { atMs: 0, kind: "reconnectTimerFired" });
  step(s, { atMs: 0, kind: "socketOpened" });
  assert.deepEqual(kinds(step(s, { atMs: 0, kind: "handshakeTimerFired" })), [
    "dropSocket",
  ]);
  // Registered in time: nothing.
  const r = registered();
  assert.deepEqual(step(r, { atMs: 0, kind: "handshakeTimerFired" }), []);
});

Deno.test("a proxy closing with 1012 or 1013 (retry soon) is retried within 4 s however many attempts failed; other closes keep the doubling backoff", () => {
  const s = fresh();
  const retryIn = (code: number) => {
    const a = step(s, socketClosed(code, { random01: 0.5 }));
    const t = a.find((x) => x.kind === "armTimer" && x.timer === "reconnect");
    return t?.kind === "armTimer" ? t.ms : -1;
  };
  for (let i = 0; i < 6; i++) retryIn(1006);
  assert.equal(retryIn(1006), BACKOFF_MAX_MS + 250);
  assert.equal(retryIn(1013), RETRY_SOON_MAX_MS);
  assert.equal(retryIn(1012), RETRY_SOON_MAX_MS);
  const early = fresh();
  const first = step(early, socketClosed(1013));
  assert.ok(first.some((a) => a.kind === "armTimer" && a.ms === 1_000));
});

Deno.test("a 1008 rejection is logged as an error and retried slowly", () => {
  const s = fresh();
  const a = step(s, socketClosed(1008, { reason: "bad secret" }));
  assert.ok(a.some((x) => x.kind === "log" && x.level === "error"));
  assert.ok(a.some((x) => x.kind === "armTimer" && x.ms === AUTH_RETRY_MS));
});

Deno.test("graceful_shutdown from the proxy refuses new work and exits when the proxy closes", () => {
  const s = registered();
  step(
    s,
    frame({
      type: "graceful_shutdown",
      reason: "maintenance",
      drain_timeout_secs: 5,
    }),
  );
  assert.equal(
    sent(step(s, frame(request("r1"))))[0]?.type,
    "response_complete",
  );
  const closed = step(s, socketClosed(1000));
  assert.deepEqual(kinds(closed), ["exit"]);
});

Deno.test("graceful_shutdown with on-server-shutdown=reconnect comes back after a short delay", () => {
  const s = registered({ onServerShutdown: "reconnect" });
  step(s, frame({ type: "graceful_shutdown" }));
  const closed = step(s, socketClosed(1000));
  assert.deepEqual(kinds(closed), ["armTimer"]);
  assert.equal(s.drain.kind, "none");
});

Deno.test("models_refresh re-lists discovered models, or repeats configured ones", () => {
  const discovered = registered({ modelsDiscovered: true });
  assert.deepEqual(kinds(step(discovered, frame({ type: "models_refresh" }))), [
    "listModels",
  ]);
  const configured = registered();
  assert.deepEqual(sent(step(configured, frame({ type: "models_refresh" }))), [
    { type: "models_update", models: ["m"], current_load: 0 },
  ]);
});

Deno.test("a periodic listing sends models_update only when the models changed", () => {
  const s = registered({ modelsDiscovered: true });
  assert.deepEqual(kinds(step(s, { atMs: 0, kind: "modelsRefreshDue" })), [
    "listModels",
  ]);
  assert.deepEqual(
    sent(
      step(s, { atMs: 0, kind: "modelsListed", models: ["m"], reply: false }),
    ),
    [],
  );
  assert.deepEqual(
    sent(
      step(s, {
        atMs: 0,
        kind: "modelsListed",
        models: ["m", "n"],
        reply: false,
      }),
    ),
    [
      { type: "models_update", models: ["m", "n"], current_load: 0 },
    ],
  );
});

Deno.test("an invalid frame is logged and ignored", () => {
  const s = registered();
  const a = step(s, { atMs: 0, kind: "frameReceived", text: "{not json" });
  assert.deepEqual(kinds(a), []);
  assert.ok(a.some((x) => x.kind === "log" && x.level === "warn"));
});

Deno.test("a proxy silent for 90 s is presumed dead: the socket is cut and the worker reconnects", () => {
  const s = fresh();
  const opened = step(s, { atMs: 0, kind: "socketOpened" });
  assert.ok(
    opened.some((a) =>
      a.kind === "armTimer" && a.timer === "idle" && a.ms === IDLE_TIMEOUT_MS
    ),
  );
  // Every frame (a ping here) re-arms the watchdog.
  const onPing = step(s, frame({ type: "ping" }));
  assert.ok(onPing.some((a) => a.kind === "armTimer" && a.timer === "idle"));
  const fired = step(s, { atMs: 0, kind: "idleTimerFired" });
  assert.deepEqual(kinds(fired), ["dropSocket"]);
  // The cut socket's close is an ordinary disconnect: backoff, then reconnect.
  const closed = step(s, socketClosed(1006));
  assert.ok(
    closed.some((a) => a.kind === "armTimer" && a.timer === "reconnect"),
  );
  // A late watchdog after the close does nothing.
  assert.deepEqual(kinds(step(s, { atMs: 0, kind: "idleTimerFired" })), []);
});

// ---- issue 14: real backends and real faults -----------------------------------

const ok = (body: string) => ({
  status_code: 200,
  headers: { "content-type": "application/json" },
  body,
  token_counts: null,
});

Deno.test("issue 14.1 with drain-v1 a signal keeps the models and says draining: true", () => {
  const s = registeredWith(["drain-v1"]);
  step(s, frame(request("r1")));
  assert.deepEqual(sent(step(s, { atMs: 0, kind: "shutdownSignalled" })), [{
    type: "models_update",
    models: ["m"],
    current_load: 1,
    draining: true,
  }]);
  // A models_refresh while draining repeats it.
  assert.deepEqual(sent(step(s, frame({ type: "models_refresh" }))), [{
    type: "models_update",
    models: ["m"],
    current_load: 1,
    draining: true,
  }]);
});

Deno.test("issue 14.1 compatibility: without drain-v1 (original server) a signal still empties the model list", () => {
  const s = registeredWith([]);
  step(s, frame(request("r1")));
  assert.deepEqual(sent(step(s, { atMs: 0, kind: "shutdownSignalled" })), [{
    type: "models_update",
    models: [],
    current_load: 1,
  }]);
});

Deno.test("issue 14.9 a request reaching a draining worker gets a scoped worker_draining error from our server's worker, a 503 for the original", () => {
  const ours = registeredWith(["drain-v1"]);
  step(ours, { atMs: 0, kind: "shutdownSignalled" });
  assert.deepEqual(sent(step(ours, frame(request("r2")))), [{
    type: "error",
    request_id: "r2",
    code: "worker_draining",
    message: "worker is shutting down and takes no new requests",
  }]);
  const original = registeredWith([]);
  step(original, { atMs: 0, kind: "shutdownSignalled" });
  const [answer] = sent(step(original, frame(request("r2"))));
  assert.equal(answer?.type, "response_complete");
  assert.equal((answer as { status_code: number }).status_code, 503);
});

Deno.test("issue 14.3 a backend that refused the connection answers a scoped backend_unavailable error (our server), a 502 for the original", () => {
  const ours = registeredWith(["capabilities-v1"]);
  step(ours, frame(request("r1")));
  const refused = step(ours, {
    atMs: 0,
    kind: "backendUnavailable",
    requestId: "r1",
    message: "connect ECONNREFUSED 127.0.0.1:8080",
  });
  assert.deepEqual(sent(refused), [{
    type: "error",
    request_id: "r1",
    code: "backend_unavailable",
    message: "connect ECONNREFUSED 127.0.0.1:8080",
  }]);
  assert.equal(ours.inFlight.size, 0);
  const original = registeredWith([]);
  step(original, frame(request("r1")));
  const [answer] = sent(
    step(original, {
      atMs: 0,
      kind: "backendUnavailable",
      requestId: "r1",
      message: "refused",
    }),
  );
  assert.equal(answer?.type, "response_complete");
  assert.equal((answer as { status_code: number }).status_code, 502);
  // After a cancel the refusal is old news.
  const late = registeredWith(["drain-v1"]);
  step(late, frame(request("r1")));
  step(late, frame({ type: "cancel", request_id: "r1", reason: "timeout" }));
  assert.deepEqual(
    step(late, {
      atMs: 0,
      kind: "backendUnavailable",
      requestId: "r1",
      message: "x",
    }),
    [],
  );
});

Deno.test("issue 14.2 an answer larger than a frame goes in response_chunk pieces with body-chunks-v1, never as an oversized frame", () => {
  const s = registeredWith(["body-chunks-v1"], {
    responseFrameBytesMax: 1_200,
  });
  step(s, frame({ ...request("r1"), is_streaming: false }));
  const body = "\u{1F600}" + 'é"x'.repeat(300);
  const frames = sent(
    step(s, {
      atMs: 0,
      kind: "backendFinished",
      requestId: "r1",
      completion: ok(body),
    }),
  );
  assert.ok(frames.length > 2);
  for (const f of frames) assert.ok(JSON.stringify(f).length <= 1_200);
  const last = frames.at(-1)!;
  assert.equal(last.type, "response_complete");
  assert.equal((last as { body: string }).body, "");
  const pieces = frames.slice(0, -1).map((f) => (f as { chunk: string }).chunk);
  assert.equal(pieces.join(""), body);
  for (const p of pieces) assert.ok(p.isWellFormed());
});

Deno.test("issue 14.2 an answer larger than a frame is a 502 response_too_large without body-chunks-v1", () => {
  const s = registeredWith([], { responseFrameBytesMax: 1_200 });
  step(s, frame({ ...request("r1"), is_streaming: false }));
  const frames = sent(
    step(s, {
      atMs: 0,
      kind: "backendFinished",
      requestId: "r1",
      completion: ok("x".repeat(5_000)),
    }),
  );
  assert.equal(frames.length, 1);
  const [f] = frames as { status_code: number; body: string }[];
  assert.equal(f!.status_code, 502);
  assert.match(f!.body, /response_too_large/);
  // One that fits goes whole.
  step(s, frame({ ...request("r2"), is_streaming: false }));
  assert.deepEqual(
    sent(
      step(s, {
        atMs: 0,
        kind: "backendFinished",
        requestId: "r2",
        completion: ok("small"),
      }),
    ).map((m) => m.type),
    ["response_complete"],
  );
});

Deno.test("issue 14.4 a backend that broke mid-answer: a scoped backend_stream_broken error to our server, a 502 to the original", () => {
  const ours = registeredWith(["capabilities-v1"]);
  step(ours, frame(request("r1")));
  const broken = {
    atMs: 0,
    kind: "backendStreamBroken" as const,
    requestId: "r1",
    message: "the backend closed the connection mid-answer",
  };
  assert.deepEqual(sent(step(ours, broken)), [{
    type: "error",
    request_id: "r1",
    code: "backend_stream_broken",
    message: "the backend closed the connection mid-answer",
  }]);
  assert.equal(ours.inFlight.size, 0);
  // Nothing more for a request already answered.
  assert.deepEqual(step(ours, broken), []);
  const original = registeredWith([]);
  step(original, frame(request("r1")));
  const [answer] = sent(step(original, broken));
  assert.equal(answer?.type, "response_complete");
  assert.equal((answer as { status_code: number }).status_code, 502);
  // It ends a signal drain like any answer.
  const draining = registeredWith(["drain-v1"]);
  step(draining, frame(request("r1")));
  step(draining, { atMs: 0, kind: "shutdownSignalled" });
  assert.deepEqual(kinds(step(draining, broken)), [
    "send",
    "closeSocket",
    "exit",
  ]);
});
