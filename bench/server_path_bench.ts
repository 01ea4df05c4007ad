// Issue 31: the server's own work per plain request and per streamed chunk,
// without its transports: the client's request as the server submits it
// (headers as a client sends them, a parsed token ask, the tracer's
// traceparent), the core's decisions, the effects' metrics tap, the request
// frame encoded, the worker's frames decoded. What the HTTP and WebSocket code
// costs is measured by bench:e2e; this is the rest, alone, where a cut of a
// microsecond shows. Each iteration is 1,000 requests (or chunks): divide by
// 1,000 for one.
import assert from "node:assert/strict";
import {
  type Effect,
  encodeFrame,
  type Event,
  eventFromBinaryFrame,
  eventFromFrame,
  reduce,
  type State,
  tokenAskOf,
} from "../core/mod.ts";
import { encodeBinaryChunkFrame } from "../core/protocol/binary.ts";
import { EXTENSION_CHUNK_BYTES } from "../core/protocol/messages.ts";
import { Metrics } from "../shell/server/ops/metrics.ts";
import { traceRequest } from "../shell/server/ops/tracing.ts";
import {
  chatCompletionBody,
  openStreams,
  request,
  stateWithWorkers,
} from "./_fixtures.ts";

const BATCH = 1000;
const FRAME_MAX = 16 << 20;

const BODY = JSON.stringify({
  model: "m",
  messages: [{ role: "user", content: "Say hello in five words." }],
  max_tokens: 32,
});

/** What a client's HTTP request carries, lowercased as the server reads it. */
function clientHeaders(): Record<string, string> {
  return {
    host: "127.0.0.1:8080",
    "user-agent": "OpenAI/JS 4.0.0",
    accept: "application/json",
    "content-type": "application/json",
    "content-length": String(BODY.length),
    connection: "keep-alive",
    "accept-encoding": "gzip, deflate",
    authorization: "Bearer sk-test",
  };
}

function requestEvent(requestId: string): Event {
  const headers = clientHeaders();
  traceRequest(headers);
  const plain = request(requestId, "m", false);
  if (plain.kind !== "requestReceived") throw new Error("not a request");
  return {
    ...plain,
    body: BODY,
    headers,
    tenant: "default",
    priority: "normal",
    cacheKey: null,
    key: null,
    tokenAsk: tokenAskOf(JSON.parse(BODY)),
  };
}

/**
 * The worker's response_complete after `request_id`, as our worker writes it
 * (llama-server-like headers and body): joined to the id in the loop, so the
 * bench times the server's decode, not an encode the worker does.
 */
const COMPLETE_TAIL = encodeFrame({
  type: "response_complete",
  request_id: "",
  status_code: 200,
  headers: {
    "content-type": "application/json; charset=utf-8",
    "server": "llama.cpp",
    "date": "Fri, 27 Nov 2026 21:00:00 GMT",
    "access-control-allow-origin": "*",
  },
  body: chatCompletionBody("m"),
  token_counts: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 },
}).slice('{"type":"response_complete","request_id":"'.length);

function completeFrame(requestId: string): string {
  return '{"type":"response_complete","request_id":"' + requestId +
    COMPLETE_TAIL;
}

/** Every effect through the metrics tap, and a request frame encoded, as run_effects does. */
function carryOut(metrics: Metrics, effects: readonly Effect[]): string | null {
  let workerId: string | null = null;
  for (const e of effects) {
    metrics.onEffect(e);
    if (e.kind === "sendToWorker") {
      encodeFrame(e.message);
      workerId = e.workerId;
    }
  }
  return workerId;
}

{
  const state = stateWithWorkers(10);
  const metrics = new Metrics(0);
  let n = 0;
  const one = () => {
    const id = `p${n++}`;
    const effects = reduce(state, requestEvent(id)).effects;
    const workerId = carryOut(metrics, effects);
    if (workerId === null) throw new Error("not dispatched");
    const done = eventFromFrame(workerId, 1, completeFrame(id), FRAME_MAX);
    return carryOut(metrics, reduce(state, done).effects);
  };
  one();
  assert.equal(state.requests.size, 0);
  assert.equal(metrics.requestsTotal(), 1);
  Deno.bench({
    group: "server path: 1,000 plain requests (10 workers)",
    name: "request in, dispatched, completed, tapped",
    fn() {
      for (let i = 0; i < BATCH; i++) one();
    },
  });
}

/** Each frame decoded, reduced and its effects tapped, as the worker door and runtime do. */
function benchChunks<F>(
  group: string,
  name: string,
  state: State,
  frames: { workerId: string; frame: F }[],
  decode: (workerId: string, frame: F) => Event,
): void {
  assert.equal(
    decode(frames[0]!.workerId, frames[0]!.frame).kind,
    "chunkReceived",
  );
  const metrics = new Metrics(0);
  Deno.bench({
    group,
    name,
    fn() {
      for (const { workerId, frame } of frames) {
        const e = decode(workerId, frame);
        for (const x of reduce(state, e).effects) metrics.onEffect(x);
      }
    },
  });
}

const CHUNK = 'data: {"choices":[{"delta":{"content":"hello"}}]}\n\n';

{
  const state = stateWithWorkers(10);
  const open = openStreams(state, 10);
  const frames = Array.from({ length: BATCH }, (_, i) => {
    const [requestId, workerId] = open[i % open.length]!;
    const frame = encodeFrame({
      type: "response_chunk",
      request_id: requestId,
      chunk: CHUNK,
    });
    return { workerId, frame };
  });
  benchChunks(
    "server path: 1,000 streamed chunks (10 open streams)",
    "chunk frame decoded, reduced, tapped",
    state,
    frames,
    (workerId, frame) => eventFromFrame(workerId, 1, frame, FRAME_MAX),
  );
}

// The same over chunk-bytes-v1 (what our worker sends): the id read from the
// frame's header, the chunk a subarray, its content deltas counted in bytes.
{
  const state = stateWithWorkers(10, 4, 20_000, [EXTENSION_CHUNK_BYTES]);
  // Ids as the server mints them (shell/server/ids.ts): 40 characters.
  const streams = openStreams(state, 10, () => `req-${crypto.randomUUID()}`);
  const chunk = new TextEncoder().encode(CHUNK);
  // A stream's chunks come one after another, as one backend writes them.
  const frames = Array.from({ length: BATCH }, (_, i) => {
    const [requestId, workerId] = streams[Math.floor(i / 100)]!;
    return { workerId, frame: encodeBinaryChunkFrame(requestId, chunk) };
  });
  benchChunks(
    "server path: 1,000 streamed chunks, chunk-bytes-v1 (10 streams)",
    "binary chunk frame decoded, reduced, tapped",
    state,
    frames,
    (workerId, frame) => eventFromBinaryFrame(workerId, 1, frame, FRAME_MAX),
  );
}
