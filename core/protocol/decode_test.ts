import assert from "node:assert/strict";
import { decodeServerFrame, decodeWorkerFrame } from "./decode.ts";
import { encodeFrame } from "./encode.ts";
import type { ServerMessage, WorkerMessage } from "./messages.ts";

const MAX = 1_000_000;

function worker(text: string): WorkerMessage {
  const d = decodeWorkerFrame(text, MAX);
  if (!d.ok) throw new Error(`expected ok, got ${JSON.stringify(d.error)}`);
  return d.message;
}

function server(text: string): ServerMessage {
  const d = decodeServerFrame(text, MAX);
  if (!d.ok) throw new Error(`expected ok, got ${JSON.stringify(d.error)}`);
  return d.message;
}

Deno.test("C3 register decodes with the wire's snake_case fields", () => {
  const m = worker(JSON.stringify({
    type: "register",
    worker_name: "gpu-box-1",
    models: ["llama3-8b"],
    max_concurrent: 2,
    protocol_version: "1",
    current_load: 0,
  }));
  assert.deepEqual(m, {
    type: "register",
    worker_name: "gpu-box-1",
    models: ["llama3-8b"],
    max_concurrent: 2,
    protocol_version: "1",
    current_load: 0,
  });
});

Deno.test("C40 ping without timestamp_unix_ms is accepted", () => {
  assert.deepEqual(server('{"type":"ping"}'), { type: "ping" });
  assert.deepEqual(server('{"type":"ping","timestamp_unix_ms":5}'), {
    type: "ping",
    timestamp_unix_ms: 5,
  });
  // The worker's pong may omit both fields too.
  assert.deepEqual(worker('{"type":"pong"}'), { type: "pong" });
});

Deno.test("C40 register_ack without warnings and request without headers are accepted", () => {
  const ack = server('{"type":"register_ack","worker_id":"w1","models":["m"]}');
  assert.equal(ack.type, "register_ack");
  assert.ok(ack.type === "register_ack" && ack.warnings == null);
  const req = server(JSON.stringify({
    type: "request",
    request_id: "r1",
    model: "m",
    endpoint_path: "/v1/chat/completions",
    is_streaming: false,
    body: "{}",
  }));
  assert.ok(req.type === "request" && req.headers == null);
  assert.ok(req.type === "request" && req.body === "{}");
});

Deno.test('C40 cancel reason may be a plain string or {"other":"x"}', () => {
  assert.deepEqual(
    server('{"type":"cancel","request_id":"r1","reason":"timeout"}'),
    { type: "cancel", request_id: "r1", reason: "timeout" },
  );
  assert.deepEqual(
    server('{"type":"cancel","request_id":"r1","reason":{"other":"x"}}'),
    { type: "cancel", request_id: "r1", reason: { other: "x" } },
  );
  for (
    const reason of [
      "client_disconnect",
      "timeout",
      "graceful_shutdown",
      "worker_disconnect",
      "requeue_exhausted",
      "server_shutdown",
    ]
  ) {
    const m = server(
      JSON.stringify({ type: "cancel", request_id: "r", reason }),
    );
    assert.ok(m.type === "cancel" && m.reason === reason);
  }
  const bad = decodeServerFrame(
    '{"type":"cancel","request_id":"r1","reason":"bored"}',
    MAX,
  );
  assert.equal(bad.ok, false);
});

Deno.test("C40 worker error frame is {request_id?, code, message}", () => {
  assert.deepEqual(
    worker(
      '{"type":"error","request_id":"r1","code":"backend","message":"boom"}',
    ),
    { type: "error", request_id: "r1", code: "backend", message: "boom" },
  );
  assert.deepEqual(
    worker('{"type":"error","code":"startup","message":"no backend"}'),
    { type: "error", code: "startup", message: "no backend" },
  );
  assert.deepEqual(worker('{"type":"error","message":"m"}'), {
    type: "error",
    message: "m",
  });
  assert.equal(decodeWorkerFrame('{"type":"error","code":"x"}', MAX).ok, false);
});

Deno.test("C40 unknown extra fields are ignored, not rejected", () => {
  assert.deepEqual(
    worker('{"type":"response_chunk","request_id":"r","chunk":"c","seq":7}'),
    { type: "response_chunk", request_id: "r", chunk: "c" },
  );
  assert.deepEqual(
    worker(
      '{"type":"register","worker_name":"w","models":[],"max_concurrent":1,"gpu":"a100"}',
    ),
    { type: "register", worker_name: "w", models: [], max_concurrent: 1 },
  );
  assert.deepEqual(
    worker(
      '{"type":"response_complete","request_id":"r","status_code":200,"x":1}',
    ),
    { type: "response_complete", request_id: "r", status_code: 200 },
  );
  assert.deepEqual(
    server('{"type":"ping","timestamp_unix_ms":1,"extra":true}'),
    {
      type: "ping",
      timestamp_unix_ms: 1,
    },
  );
  assert.deepEqual(
    server('{"type":"models_refresh","reason":"r","future":[1,2]}'),
    { type: "models_refresh", reason: "r" },
  );
});

Deno.test("C33 garbage, non-object, unknown and oversized frames decode to typed errors without throwing", () => {
  const cases: [string, number, string][] = [
    ["not json at all", MAX, "notJson"],
    ["", MAX, "notJson"],
    ['{"type":"register"', MAX, "notJson"],
    ["[1,2,3]", MAX, "notAnObject"],
    ["null", MAX, "notAnObject"],
    ['"register"', MAX, "notAnObject"],
    ["42", MAX, "notAnObject"],
    ['{"type":"launch_missiles"}', MAX, "unknownType"],
    ['{"no_type":1}', MAX, "unknownType"],
    ['{"type":7}', MAX, "unknownType"],
    // A server message sent by a worker is not a worker message.
    ['{"type":"ping"}', MAX, "unknownType"],
    ['{"type":"response_chunk","request_id":"r"}', MAX, "invalidFields"],
    [
      '{"type":"response_chunk","request_id":1,"chunk":"c"}',
      MAX,
      "invalidFields",
    ],
    ['{"type":"register","worker_name":"w"}', MAX, "invalidFields"],
    [
      '{"type":"register","worker_name":"w","models":[],"max_concurrent":1.5}',
      MAX,
      "invalidFields",
    ],
    [
      '{"type":"response_complete","request_id":"r","status_code":"200"}',
      MAX,
      "invalidFields",
    ],
    ['{"type":"pong","current_load":-1}', MAX, "invalidFields"],
    [
      '{"type":"response_chunk","request_id":"r","chunk":"c"}',
      10,
      "frameTooLarge",
    ],
  ];
  for (const [text, max, kind] of cases) {
    const d = decodeWorkerFrame(text, max);
    assert.equal(d.ok, false, text);
    assert.ok(!d.ok && d.error.kind === kind, `${text}: ${JSON.stringify(d)}`);
    assert.ok(!d.ok && d.error.message.length > 0);
  }
  // Exactly at the limit is still accepted.
  const exact = '{"type":"pong"}';
  assert.equal(decodeWorkerFrame(exact, exact.length).ok, true);
  const s = decodeServerFrame('{"type":"response_chunk"}', MAX);
  assert.ok(!s.ok && s.error.kind === "unknownType");
});

Deno.test("C13 server messages encode to the wire names and decode back unchanged", () => {
  const messages: ServerMessage[] = [
    {
      type: "register_ack",
      worker_id: "w1",
      models: ["m"],
      warnings: [],
      protocol_version: "1",
    },
    {
      type: "request",
      request_id: "r1",
      model: "m",
      endpoint_path: "/v1/messages",
      is_streaming: true,
      body: '{"a":"é\\n"}',
      headers: { "anthropic-version": "2023-06-01" },
    },
    { type: "cancel", request_id: "r1", reason: { other: "stream_too_large" } },
    { type: "ping", timestamp_unix_ms: 15_000 },
    { type: "graceful_shutdown", reason: "bye", drain_timeout_secs: 30 },
    { type: "models_refresh", reason: "operator" },
  ];
  for (const m of messages) {
    const text = encodeFrame(m);
    assert.deepEqual(server(text), m);
    assert.match(text, new RegExp(`^\\{"type":"${m.type}"`));
  }
});
