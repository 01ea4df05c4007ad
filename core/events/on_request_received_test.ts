import assert from "node:assert/strict";
import {
  actions,
  addRequest,
  addWorker,
  complete,
  dispatched,
  drainRequested,
  modelsUpdate,
  newState,
  only,
  queued,
  sent,
  statusOf,
  step,
  worker,
} from "../_testing.ts";
import { queueDepth } from "../queries.ts";

// ---- C9: bounded queue --------------------------------------------------------

Deno.test("C9 beyond the queue bound a request gets 503 queue_full with retryAfterSecs", () => {
  const state = newState({ queueLenMax: 2, retryAfterSecs: 3 });
  addWorker(state, "w1", { maxConcurrent: 1 });
  addRequest(state, "r1");
  addRequest(state, "r2");
  addRequest(state, "r3");
  assert.deepEqual(queued(state), ["r2", "r3"]);
  const effects = addRequest(state, "r4");
  const err = only(effects, "respondError");
  assert.deepEqual(err.error, {
    status: 503,
    code: "queue_full",
    message: err.error.message,
    retryAfterSecs: 3,
    details: { queueDepth: 2, avgWaitMs: 0 },
  });
  assert.match(err.error.message, /queue full/);
  const finished = only(effects, "requestFinished");
  assert.equal(finished.outcome, "rejected");
  assert.equal(finished.status, 503);
  assert.equal(
    effects.filter((e) => e.kind === "log" && e.message === "queue full")
      .length,
    1,
  );
  assert.deepEqual(dispatched(effects), []);
  // State: r4 never existed; the queue is unchanged.
  assert.equal(state.requests.has("r4"), false);
  assert.deepEqual(queued(state), ["r2", "r3"]);
  assert.equal(queueDepth(state), 2);
});

Deno.test("C9 the queue is FIFO among requests a freed worker can serve", () => {
  const state = newState();
  // Queue with no workers at all (C11: nothing is unknown yet).
  addRequest(state, "a1", { model: "a" });
  addRequest(state, "b1", { model: "b" });
  addRequest(state, "a2", { model: "a" });
  assert.deepEqual(queued(state), ["a1", "b1", "a2"]);
  // A worker serving only b takes b1 although a1 is older: a1 is not servable there.
  const effB = addWorker(state, "wb", { models: ["b"], maxConcurrent: 5 });
  assert.deepEqual(dispatched(effB), [["b1", "wb"]]);
  const effA = addWorker(state, "wa", { models: ["a"], maxConcurrent: 5 });
  assert.deepEqual(dispatched(effA), [["a1", "wa"], ["a2", "wa"]]);
  assert.equal(queueDepth(state), 0);
  assert.deepEqual([...worker(state, "wa").inFlight], ["a1", "a2"]);
});

// ---- C10: queue drain triggers ------------------------------------------------------

Deno.test("C10 the queue drains oldest-first when a worker registers", () => {
  const state = newState();
  addRequest(state, "r1", { model: "a" });
  addRequest(state, "r2", { model: "b" });
  addRequest(state, "r3", { model: "a" });
  addRequest(state, "r4", { model: "b" });
  const effects = addWorker(state, "w1", {
    models: ["b", "a"],
    maxConcurrent: 3,
  });
  // register_ack goes before any request.
  assert.equal(
    effects.findIndex((e) => e.kind === "sendToWorker"),
    effects.findIndex((e) =>
      e.kind === "sendToWorker" && e.message.type === "register_ack"
    ),
  );
  assert.deepEqual(dispatched(effects), [["r1", "w1"], ["r2", "w1"], [
    "r3",
    "w1",
  ]]);
  assert.deepEqual(queued(state), ["r4"]);
  assert.equal(statusOf(state, "r3"), "dispatched");
});

Deno.test("C10 the queue drains oldest-first when a slot frees", () => {
  const state = newState();
  addWorker(state, "w1", { models: ["a", "b"], maxConcurrent: 1 });
  addRequest(state, "r0", { model: "a" });
  addRequest(state, "r1", { model: "b" });
  addRequest(state, "r2", { model: "a" });
  assert.deepEqual(queued(state), ["r1", "r2"]);
  const effects = complete(state, "w1", "r0", { body: "done" });
  const order = actions(effects).map((e) =>
    e.kind === "sendToWorker" ? e.message.type : e.kind
  );
  // The finished request is answered before the next one is sent.
  assert.deepEqual(order, ["respond", "requestFinished", "request"]);
  assert.deepEqual(dispatched(effects), [["r1", "w1"]]);
  assert.deepEqual(dispatched(complete(state, "w1", "r1")), [["r2", "w1"]]);
  assert.deepEqual(queued(state), []);
});

Deno.test("C10 the queue drains when models_update adds a served model", () => {
  const state = newState();
  addRequest(state, "r1", { model: "y" });
  addWorker(state, "w1", { models: ["x"] });
  assert.equal(statusOf(state, "r1"), "queued");
  const effects = step(
    state,
    modelsUpdate("w1", ["x", "y"], { atMs: 1, currentLoad: 0 }),
  );
  assert.deepEqual(dispatched(effects), [["r1", "w1"]]);
  assert.deepEqual(worker(state, "w1").models, ["x", "y"]);
  assert.equal(statusOf(state, "r1"), "dispatched");
});

// ---- C11: unknown model ---------------------------------------------------------------

Deno.test("C11 with workers connected a model none acked gets 404 no provider for model", () => {
  const state = newState();
  addWorker(state, "w1", { models: ["llama3-8b"] });
  const effects = addRequest(state, "r1", { model: "gpt-9" });
  assert.deepEqual(actions(effects).map((e) => e.kind), [
    "respondError",
    "requestFinished",
  ]);
  const err = only(effects, "respondError").error;
  assert.equal(err.status, 404);
  assert.equal(err.code, "model_not_found");
  assert.match(err.message, /no provider for model "gpt-9"/);
  assert.equal(err.retryAfterSecs, undefined);
  assert.equal(state.requests.size, 0);
  assert.equal(queueDepth(state), 0);
});

Deno.test("C11 with zero workers connected the request is queued, not refused", () => {
  const state = newState();
  // A socket that has not registered yet does not count as a worker.
  step(state, {
    kind: "workerConnectAttempted",
    atMs: 0,
    workerId: "p1",
    provider: "local",
    clientIp: "1.1.1.1",
    secretValid: true,
  });
  const effects = addRequest(state, "r1", { model: "gpt-9" });
  assert.deepEqual(actions(effects), []);
  assert.equal(statusOf(state, "r1"), "queued");
  assert.deepEqual(queued(state), ["r1"]);
});

Deno.test("C11 a model served only by a full or draining worker is known: queued, not 404", () => {
  const state = newState();
  addWorker(state, "w1", { models: ["m"], maxConcurrent: 1 });
  addRequest(state, "r1");
  step(state, drainRequested("w1", "op"));
  const effects = addRequest(state, "r2");
  assert.deepEqual(actions(effects), []);
  assert.equal(statusOf(state, "r2"), "queued");
});

// ---- C13: request frame and forwarded headers -------------------------------------------

Deno.test("C13 only the six compatibility headers are forwarded in the request frame", () => {
  const state = newState();
  addWorker(state, "w1");
  const body =
    '{"model":"m","messages":[{"role":"user","content":"hé"}],"stream":true}';
  const effects = addRequest(state, "r1", {
    stream: true,
    endpointPath: "/v1/messages",
    body,
    headers: {
      authorization: "Bearer sk",
      "content-type": "application/json",
      "openai-organization": "org",
      "x-api-key": "k",
      "anthropic-version": "2023-06-01",
      "anthropic-beta": "tools",
      cookie: "s=1",
      host: "relay",
      "x-forwarded-for": "1.2.3.4",
      "x-worker-secret": "nope",
      "content-length": "99",
      "Authorization-Extra": "x",
    },
  });
  const [msg] = sent(effects, "request", "w1");
  assert.deepEqual(msg, {
    type: "request",
    request_id: "r1",
    model: "m",
    endpoint_path: "/v1/messages",
    is_streaming: true,
    body,
    headers: {
      authorization: "Bearer sk",
      "content-type": "application/json",
      "openai-organization": "org",
      "x-api-key": "k",
      "anthropic-version": "2023-06-01",
      "anthropic-beta": "tools",
    },
    method: "POST",
    to: "w1",
  });
  // The body is forwarded as the very same string.
  assert.equal(msg?.body, body);
  assert.deepEqual(Object.keys(state.requests.get("r1")!.headers).sort(), [
    "anthropic-beta",
    "anthropic-version",
    "authorization",
    "content-type",
    "openai-organization",
    "x-api-key",
  ]);
});

Deno.test("C13 header names are matched case-insensitively and sent lowercase", () => {
  const state = newState();
  addWorker(state, "w1");
  const [msg] = sent(
    addRequest(state, "r1", {
      headers: { "Content-Type": "application/json", Cookie: "x" },
    }),
    "request",
  );
  assert.deepEqual(msg?.headers, { "content-type": "application/json" });
});

// ---- C31, C47: distinct client errors ------------------------------------------------------

Deno.test("C31 provider disabled answers 503 Provider is currently disabled with Retry-After", () => {
  const state = newState({ providers: [{ name: "local", enabled: false }] });
  const effects = addRequest(state, "r1");
  const err = only(effects, "respondError").error;
  assert.deepEqual(err, {
    status: 503,
    code: "provider_disabled",
    message: "Provider is currently disabled",
    retryAfterSecs: 1,
  });
  assert.equal(only(effects, "requestFinished").outcome, "rejected");
  assert.equal(state.requests.size, 0);
});

Deno.test("C47 every refusal has its spec status and every 503 carries retryAfterSecs", () => {
  const cases: {
    name: string;
    status: number;
    code: string;
    run: () => ReturnType<typeof step>;
  }[] = [
    {
      name: "queue full",
      status: 503,
      code: "queue_full",
      run: () => {
        const s = newState({ queueLenMax: 0 });
        return addRequest(s, "r1");
      },
    },
    {
      name: "unknown model",
      status: 404,
      code: "model_not_found",
      run: () => {
        const s = newState();
        addWorker(s, "w1", { models: ["a"] });
        return addRequest(s, "r1", { model: "b" });
      },
    },
    {
      name: "queue timeout",
      status: 504,
      code: "queue_timeout",
      run: () => {
        const s = newState({ queueTimeoutMs: 10 });
        addRequest(s, "r1");
        return step(s, { kind: "tick", atMs: 10 });
      },
    },
    {
      name: "request timeout",
      status: 504,
      code: "request_timeout",
      run: () => {
        const s = newState({ requestTimeoutMs: 10 });
        addWorker(s, "w1");
        addRequest(s, "r1");
        return step(s, { kind: "tick", atMs: 10 });
      },
    },
    {
      name: "requeue exhausted",
      status: 503,
      code: "requeue_exhausted",
      run: () => {
        const s = newState({ requeueCountMax: 0 });
        addWorker(s, "w1");
        addRequest(s, "r1");
        return step(s, {
          kind: "workerDisconnected",
          atMs: 1,
          workerId: "w1",
          reason: "eof",
        });
      },
    },
    {
      name: "shutting down",
      status: 503,
      code: "shutting_down",
      run: () => {
        const s = newState();
        step(s, { kind: "shutdownRequested", atMs: 0 });
        return addRequest(s, "r1");
      },
    },
    {
      name: "provider disabled",
      status: 503,
      code: "provider_disabled",
      run: () =>
        addRequest(
          newState({ providers: [{ name: "local", enabled: false }] }),
          "r1",
        ),
    },
  ];
  for (const c of cases) {
    const effects = c.run();
    const err = only(effects, "respondError").error;
    assert.equal(err.status, c.status, c.name);
    assert.equal(err.code, c.code, c.name);
    assert.ok(err.message.length > 0, c.name);
    if (err.status === 503 || err.status === 429) {
      assert.equal(err.retryAfterSecs, 1, c.name);
    }
    const fin = only(effects, "requestFinished");
    assert.equal(fin.status, c.status, c.name);
    assert.equal(fin.requestId, "r1", c.name);
  }
});
