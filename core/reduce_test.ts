import assert from "node:assert/strict";
import { initialState, makeConfig, reduce } from "./mod.ts";
import type { Event } from "./mod.ts";
import { completeEvent } from "./_testing.ts";

function run(events: Event[]): string {
  const state = initialState(makeConfig());
  return JSON.stringify(events.map((e) => reduce(state, e).effects));
}

Deno.test("determinism: the same event list twice yields identical effects", () => {
  const events: Event[] = [
    {
      kind: "workerConnectAttempted",
      atMs: 0,
      workerId: "w1",
      provider: "local",
      clientIp: "1.1.1.1",
      secretValid: true,
    },
    {
      kind: "registerReceived",
      atMs: 1,
      workerId: "w1",
      workerName: "a",
      models: ["m"],
      maxConcurrent: 2,
      protocolVersion: "1",
      currentLoad: 0,
    },
    {
      kind: "requestReceived",
      atMs: 2,
      requestId: "r1",
      api: "openai",
      endpointPath: "/v1/chat/completions",
      model: "m",
      isStreaming: true,
      body: "{}",
      headers: {},
    },
    {
      kind: "chunkReceived",
      atMs: 3,
      workerId: "w1",
      requestId: "r1",
      chunk: "data: 1\n\n",
    },
    completeEvent("w1", "r1", { atMs: 4 }),
    { kind: "tick", atMs: 20_000 },
  ];
  const first = run(events);
  assert.equal(first, run(events));
  assert.match(first, /writeChunk/);
});
