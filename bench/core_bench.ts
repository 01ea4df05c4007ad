// Core reducer alone: per-event cost as workers and queued requests grow.
// Each iteration reduces a batch of 1,000 events; divide by 1,000 for one event.
import assert from "node:assert/strict";
import {
  decodeWorkerFrame,
  type Event,
  initialState,
  makeConfig,
  reduce,
  workerMessageSchema,
} from "../core/mod.ts";
import {
  addWorker,
  completed,
  dispatchAndComplete,
  openStreams,
  request,
  stateWithWorkers,
} from "./_fixtures.ts";

const BATCH = 1000;
const CHUNK = 'data: {"choices":[{"delta":{"content":"hello"}}]}\n\n';

function chunkFixture(workers: number, streams: number) {
  const state = stateWithWorkers(workers);
  const open = openStreams(state, streams);
  const events: Event[] = [];
  for (let i = 0; i < BATCH; i++) {
    const [requestId, workerId] = open[i % open.length]!;
    events.push({
      kind: "chunkReceived",
      atMs: 1,
      workerId,
      requestId,
      chunk: CHUNK,
    });
  }
  // Verify once, outside the timed loop, that the path writes the chunk untouched.
  const first = reduce(state, events[0]!).effects;
  assert.ok(first.some((e) => e.kind === "writeChunk" && e.chunk === CHUNK));
  return { state, events };
}

for (
  const [workers, streams] of [[10, 10], [1000, 10], [10_000, 10], [
    10_000,
    10_000,
  ]] as const
) {
  const { state, events } = chunkFixture(workers, streams);
  Deno.bench({
    group: "chunk: 1,000 chunk events, by workers and open streams",
    name: `${workers} workers, ${streams} open streams`,
    baseline: workers === 10,
    fn() {
      for (const e of events) reduce(state, e);
    },
  });
}

// Dispatch: a request arrives, goes to the best worker, completes (slot freed).
for (const workers of [10, 1000, 10_000]) {
  const state = stateWithWorkers(workers);
  let n = 0;
  Deno.bench({
    group: "dispatch+complete: 1,000 requests, by workers",
    name: `${workers} workers`,
    baseline: workers === 10,
    fn() {
      for (let i = 0; i < BATCH; i++) {
        dispatchAndComplete(state, `d${n++}`, "m");
      }
    },
  });
}

// One worker of the fleet serves the model asked for, so it alone moves between
// load levels (and, with one slot, in and out of the buckets) while every other
// worker sits at level 0 in the same buckets of the model they share: the
// load-buckets move path, without residency (issue 30's finding).
for (const maxConcurrent of [4, 1]) {
  for (const workers of [10, 1000, 10_000]) {
    const state = initialState(
      makeConfig({ requestTimeoutMs: 1e12, queueTimeoutMs: 1e12 }),
    );
    for (let i = 0; i < workers; i++) {
      const models = i === 0 ? ["only", "m"] : ["m"];
      addWorker(state, `w${i}`, { models, maxConcurrent });
    }
    let n = 0;
    Deno.bench({
      group:
        `dispatch+complete: 1,000 requests served by one worker of the fleet, max_concurrent ${maxConcurrent}`,
      name: `${workers} workers`,
      baseline: workers === 10,
      fn() {
        for (let i = 0; i < BATCH; i++) {
          const id = `o${n++}`;
          const effects = reduce(state, request(id, "only", false)).effects;
          const send = effects[0];
          if (send?.kind !== "sendToWorker") throw new Error("not dispatched");
          reduce(state, completed(id, send.workerId));
        }
      },
    });
  }
}

// Queue: with every worker busy, requests queue; a freed slot takes the oldest.
for (
  const [workers, queued] of [[10, 0], [10, 10_000], [10_000, 0], [
    10_000,
    10_000,
  ]] as const
) {
  const state = stateWithWorkers(workers, 1);
  const open = openStreams(state, workers);
  for (let i = 0; i < queued; i++) reduce(state, request(`q${i}`, "m"));
  let n = 0;
  Deno.bench({
    group: "queue: enqueue + dispatch-on-free, by workers and queue depth",
    name: `${workers} busy workers, ${queued} queued`,
    baseline: workers === 10 && queued === 0,
    fn() {
      for (let i = 0; i < BATCH; i++) {
        const id = `x${n++}`;
        reduce(state, request(id, "m"));
        // The oldest stream's worker completes; the head of the queue takes its slot.
        const [rid, wid] = open.shift()!;
        const effects = reduce(state, completed(rid, wid)).effects;
        const send = effects.find((e) => e.kind === "sendToWorker");
        if (send?.kind !== "sendToWorker" || send.message.type !== "request") {
          throw new Error("no dispatch");
        }
        open.push([send.message.request_id, wid]);
      }
    },
  });
}

// Wire decode of the hot frame: the hand-written response_chunk guard after one
// JSON.parse (what the server runs) against a zod discriminated-union parse.
const FRAMES = Array.from(
  { length: BATCH },
  (_, i) =>
    JSON.stringify({
      type: "response_chunk",
      request_id: `r${i}`,
      chunk: CHUNK,
    }),
);
{
  const d = decodeWorkerFrame(FRAMES[0]!, 1 << 20);
  assert.ok(d.ok && d.message.type === "response_chunk");
  assert.ok(workerMessageSchema.safeParse(JSON.parse(FRAMES[0]!)).success);
}
Deno.bench({
  group: "decode: 1,000 response_chunk frames",
  name: "hand-written guard (decodeWorkerFrame)",
  baseline: true,
  fn() {
    for (const f of FRAMES) decodeWorkerFrame(f, 1 << 20);
  },
});
Deno.bench({
  group: "decode: 1,000 response_chunk frames",
  name: "zod discriminated union",
  fn() {
    for (const f of FRAMES) workerMessageSchema.safeParse(JSON.parse(f));
  },
});
