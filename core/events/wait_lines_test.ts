// Issue 30: keep-alive and progress lines for a stream that waits
// (core/state/wait_lines.ts).
import assert from "node:assert/strict";
import {
  addRequest,
  addWorker,
  chunk,
  complete,
  disconnect,
  kinds,
  newState,
  ofKind,
  reportResidency,
  step,
  tick,
} from "../_testing.ts";
import type { Effect } from "../effect.ts";
import { EXTENSION_RESIDENCY } from "../protocol/messages.ts";

const PROGRESS = { "x-modelrelay-progress": "1" };

/** The comment lines written to `requestId`, in order. */
function lines(effects: Effect[], requestId = "r1"): string[] {
  return ofKind(effects, "writeChunk").filter((e) => e.requestId === requestId)
    .map((e) => String(e.chunk));
}

Deno.test("keep-alive: a queued stream gets `: keep-alive` every N s of silence, its stream opened by the first", () => {
  const state = newState({ sseKeepAliveMs: 2_000 });
  addRequest(state, "r1", { stream: true, atMs: 0 });
  assert.deepEqual(kinds(tick(state, 1_999)), []);
  const first = tick(state, 2_000);
  assert.deepEqual(kinds(first), ["startStream", "writeChunk"]);
  assert.deepEqual(lines(first), [": keep-alive\n\n"]);
  assert.equal(ofKind(first, "startStream")[0]!.head, undefined);
  assert.deepEqual(kinds(tick(state, 3_999)), []);
  const second = tick(state, 4_000);
  assert.deepEqual(lines(second), [": keep-alive\n\n"]);
  assert.ok(!kinds(second).includes("startStream"), "the head goes once");
});

Deno.test("keep-alive: the backend's first byte ends the lines and is written without a second head", () => {
  const state = newState({ sseKeepAliveMs: 1_000 });
  addRequest(state, "r1", { stream: true, atMs: 0 });
  tick(state, 1_000);
  addWorker(state, "w1", { atMs: 1_500 });
  const first = chunk(state, "w1", "r1", "data: {}\n\n", 1_600);
  assert.deepEqual(kinds(first), ["writeChunk"]);
  assert.deepEqual(lines(first), ["data: {}\n\n"]);
  assert.deepEqual(kinds(tick(state, 9_000)), []);
  const end = complete(state, "w1", "r1", { atMs: 9_100 });
  assert.ok(kinds(end).includes("endStream"));
});

Deno.test("keep-alive: a stream answered before its first line is untouched (the backend's head, no comment)", () => {
  const state = newState({ sseKeepAliveMs: 2_000 });
  addWorker(state, "w1");
  addRequest(state, "r1", { stream: true, atMs: 0 });
  const first = chunk(state, "w1", "r1", "data: {}\n\n", 100);
  assert.deepEqual(kinds(first), ["startStream", "writeChunk"]);
  assert.deepEqual(kinds(tick(state, 5_000)), []);
});

Deno.test("keep-alive: off by default, and never for a non-streaming request or a non-SSE route", () => {
  const off = newState({ queueTimeoutMs: 600_000 });
  addRequest(off, "r1", { stream: true, atMs: 0 });
  assert.deepEqual(kinds(tick(off, 60_000)), []);
  const on = newState({ sseKeepAliveMs: 1_000, queueTimeoutMs: 600_000 });
  addRequest(on, "r1", { stream: false, atMs: 0 });
  addRequest(on, "r2", {
    stream: true,
    atMs: 0,
    endpointPath: "/v1/audio/speech",
  });
  assert.deepEqual(kinds(tick(on, 5_000)), []);
});

Deno.test("keep-alive: an error after the lines is an SSE error event (endStream), not a status", () => {
  const state = newState({ sseKeepAliveMs: 1_000, queueTimeoutMs: 3_000 });
  addRequest(state, "r1", { stream: true, atMs: 0 });
  tick(state, 1_000);
  const end = tick(state, 3_000);
  const stream = ofKind(end, "endStream");
  assert.equal(stream.length, 1);
  assert.equal(stream[0]!.error?.code, "queue_timeout");
  assert.equal(ofKind(end, "respondError").length, 0);
});

Deno.test("keep-alive: a backend error with no byte after the lines ends the stream with an SSE error event", () => {
  const state = newState({ sseKeepAliveMs: 1_000 });
  addRequest(state, "r1", { stream: true, atMs: 0 });
  tick(state, 1_000);
  addWorker(state, "w1", { atMs: 1_100 });
  const end = complete(state, "w1", "r1", {
    status: 400,
    body: '{"error":{"message":"bad"}}',
  });
  assert.equal(ofKind(end, "respond").length, 0);
  assert.equal(ofKind(end, "endStream")[0]!.error?.status, 502);
});

Deno.test("keep-alive: the commit point for requeue stays the backend's first byte", () => {
  const state = newState({ sseKeepAliveMs: 1_000 });
  addWorker(state, "w1", { maxConcurrent: 1 });
  addRequest(state, "r1", { stream: true, atMs: 0 });
  tick(state, 1_000); // dispatched, no byte: a keep-alive went out
  const lost = disconnect(state, "w1", 1_200);
  assert.equal(ofKind(lost, "endStream").length, 0, "requeued, not failed");
  assert.equal(state.requests.get("r1")?.status.kind, "queued");
  addWorker(state, "w2", { atMs: 1_300 });
  const first = chunk(state, "w2", "r1", "data: {}\n\n", 1_400);
  assert.deepEqual(kinds(first), ["writeChunk"]);
});

Deno.test("progress: X-ModelRelay-Progress: 1 writes `: queued position=N` at once and as it moves up", () => {
  const state = newState({ queueTimeoutMs: 600_000 });
  addRequest(state, "r0", { stream: true, atMs: 0 });
  const arrived = addRequest(state, "r1", {
    stream: true,
    atMs: 10,
    headers: PROGRESS,
  });
  assert.deepEqual(kinds(arrived).filter((k) => k !== "log"), [
    "startStream",
    "writeChunk",
  ]);
  assert.deepEqual(lines(arrived), [": queued position=2\n\n"]);
  assert.deepEqual(lines(tick(state, 100)), [], "no change, no line");
  step(state, { kind: "clientDisconnected", atMs: 200, requestId: "r0" });
  assert.deepEqual(lines(tick(state, 300)), [": queued position=1\n\n"]);
  // Other models' requests are not ahead of it.
  addRequest(state, "r2", {
    stream: true,
    atMs: 400,
    model: "other",
    headers: PROGRESS,
  });
  assert.deepEqual(lines(tick(state, 500), "r2"), []);
});

Deno.test("progress: no line for a request dispatched at once", () => {
  const state = newState();
  addWorker(state, "w1");
  const arrived = addRequest(state, "r1", { stream: true, headers: PROGRESS });
  assert.deepEqual(lines(arrived), []);
  assert.deepEqual(lines(tick(state, 1_000)), []);
});

Deno.test("progress: `: loading model=M` once its worker loads the model for it, and no more lines after the first byte", () => {
  const state = newState({ queueTimeoutMs: 600_000 });
  addWorker(state, "w1", {
    models: ["a", "b"],
    extensions: [EXTENSION_RESIDENCY],
  });
  reportResidency(state, "w1", ["b"]);
  const arrived = addRequest(state, "r1", {
    model: "a",
    stream: true,
    headers: PROGRESS,
  });
  assert.deepEqual(ofKind(arrived, "sendToWorker").length, 1);
  assert.deepEqual(lines(arrived), [": loading model=a\n\n"]);
  assert.deepEqual(lines(tick(state, 1_000)), []);
  assert.deepEqual(
    kinds(chunk(state, "w1", "r1", "data: {}\n\n", 2_000))
      .filter((k) => k === "startStream"),
    [],
  );
  assert.deepEqual(lines(tick(state, 3_000)), []);
});
