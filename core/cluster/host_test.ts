// The cluster host (issue 34) over fake ports: one instance holding both the
// worker and the client, its records read back as a one-instance log. What
// the direct path carries is counted (issue 33 item 1, cluster part), and a
// whole stream ends cleanly when the instance gives up its log (item 4).
import assert from "node:assert/strict";
import { makeConfig } from "../config.ts";
import type { Effect } from "../effect.ts";
import type { Event } from "../events/event.ts";
import {
  completeEvent,
  connectEvent,
  register,
  requestReceived,
} from "../_testing.ts";
import {
  type ClusterPorts,
  type Host,
  type HostInput,
  makeHost,
  stepHost,
  type Unstamped,
} from "./host.ts";
import { initialInstance } from "./instance.ts";
import { type ClusterRecord, encodeRecord } from "./record.ts";
import { initialClusterState } from "./replica.ts";

type Rig = {
  h: Host;
  /** Records appended and not yet in the log. */
  appended: ClusterRecord[];
  /** Every record appended. */
  logged: ClusterRecord[];
  ran: Effect[];
  now: number;
  entries: number;
  generation: number;
  /** One input at the rig's clock. */
  give(input: Unstamped): void;
  /** The turn ends (flush), and everything appended is read back. */
  settle(): void;
};

function rig(): Rig {
  const config = makeConfig({});
  const inst = initialInstance(config, initialClusterState(config), "i");
  const clients = new Set<string>();
  const r = {
    appended: [],
    logged: [],
    ran: [],
    now: 1_000,
    entries: 0,
    generation: 0,
    flushArmed: false,
  } as unknown as Rig & { flushArmed: boolean; clients: Set<string> };
  r.clients = clients;
  const ports: ClusterPorts = {
    append: (record) => {
      r.appended.push(structuredClone(record));
      r.logged.push(structuredClone(record));
    },
    read: (generation) => void (r.generation = generation),
    join: () => {},
    resume: () => {},
    putSnapshot: () => {},
    sendPiece: () => assert.fail("one instance: no peer"),
    closeLinks: () => {},
    holds: {
      client: (id) => clients.has(id),
      clientStarted: (id) =>
        r.ran.some((e) => e.kind === "startStream" && e.requestId === id),
      worker: (id) => id === "w1",
      handshake: () => false,
      clients: () => [...clients],
      workers: () => ["w1"],
      handshakes: () => [],
    },
    run: (effect) => {
      r.ran.push(effect);
      if (
        effect.kind === "endStream" || effect.kind === "respond" ||
        effect.kind === "respondError"
      ) clients.delete(effect.requestId);
    },
    arm: (timer) => void (timer === "flush" && (r.flushArmed = true)),
    log: () => {},
    fact: () => {},
  };
  r.h = makeHost(inst, ports);
  r.give = (input) => stepHost(r.h, { ...input, atMs: r.now } as HostInput);
  r.settle = () => {
    for (let round = 0; round < 5; round++) {
      if (r.flushArmed) {
        r.flushArmed = false;
        r.give({ kind: "flushDue" });
      }
      for (const record of r.appended.splice(0)) {
        r.now += 1;
        r.give({
          kind: "entryRead",
          generation: r.generation,
          entry: { id: `${r.now}-0`, ms: r.now, data: encodeRecord(record) },
        });
      }
    }
  };
  r.give({ kind: "joinRead", epoch: "e1", snapshot: null });
  r.give({ kind: "caughtUp", generation: r.generation });
  return r;
}

/** A worker on this instance, and a plain stream (no usage asked) from a client here. */
function streamDispatched(): Rig & { clients: Set<string> } {
  const r = rig() as Rig & { clients: Set<string> };
  const observe = (event: Event) => r.give({ kind: "observed", event });
  observe(connectEvent("w1", { atMs: r.now }));
  observe(register("w1", { atMs: r.now }));
  r.settle();
  r.clients.add("r1");
  observe(requestReceived("r1", {
    atMs: r.now,
    stream: true,
    body: '{"model":"m","stream":true}',
  }));
  r.settle();
  assert.ok(
    r.ran.some((e) => e.kind === "sendToWorker" && e.workerId === "w1"),
    "dispatched to the worker held here",
  );
  for (const text of ["a", "b", "c"]) {
    observe({
      kind: "chunkReceived",
      atMs: r.now,
      workerId: "w1",
      requestId: "r1",
      chunk: `data: {"choices":[{"delta":{"content":"${text}"}}]}\n\n`,
    });
    r.settle();
  }
  return r;
}

const complete = (now: number): Event =>
  completeEvent("w1", "r1", { atMs: now });

function finished(r: Rig): Extract<Effect, { kind: "requestFinished" }> {
  const f = r.ran.find((e) => e.kind === "requestFinished");
  assert.ok(f?.kind === "requestFinished", "a usage record was written");
  return f;
}

Deno.test("cluster host: a stream's chunks go direct, never into the log, yet its content deltas are charged (issue 33)", () => {
  const r = streamDispatched();
  r.give({ kind: "observed", event: complete(r.now) });
  r.settle();
  const writes = r.ran.filter((e) => e.kind === "writeChunk").length;
  assert.equal(writes, 3, "the client got the three chunks");
  const events = r.logged.flatMap((x) => x.kind === "events" ? x.events : []);
  assert.deepEqual(
    events.filter((e) => e.kind === "chunkReceived").map((e) => e.chunk),
    [""],
    "only the stream's commit (an empty chunk) went through the log",
  );
  assert.ok(
    r.logged.some((x) => x.kind === "events" && x.deltas?.r1 === 3),
    "the end's record carries the deltas counted where they were routed",
  );
  const f = finished(r);
  assert.equal(f.outcome, "completed");
  assert.deepEqual(
    { completion: f.usage.completion, estimated: f.usage.estimated },
    { completion: 3, estimated: true },
  );
});

Deno.test("cluster host: an instance giving up its log ends a whole stream cleanly, with its usage record (issue 33 item 4)", () => {
  const r = streamDispatched();
  // The worker completes: the end marker reaches the client's receiver at
  // once (same instance); the completion's record is appended, never read.
  r.give({ kind: "observed", event: complete(r.now) });
  r.give({ kind: "flushDue" });
  r.appended.length = 0;
  r.give({ kind: "logLost", reason: "log reset", reset: true });
  const end = r.ran.find((e) => e.kind === "endStream");
  assert.deepEqual(end, { kind: "endStream", requestId: "r1", error: null });
  const f = finished(r);
  assert.equal(f.outcome, "completed");
  assert.equal(f.usage.completion, 3);
  // The replica was reset before endLocal: the record's times still hold.
  assert.ok(f.durationMs >= 0 && (f.firstByteMs ?? 0) >= 0, JSON.stringify(f));
});

Deno.test("cluster host: a stream still running when the log is given up ends with the error", () => {
  const r = streamDispatched();
  r.give({ kind: "logLost", reason: "log reset", reset: true });
  const end = r.ran.find((e) => e.kind === "endStream");
  assert.ok(end?.kind === "endStream" && end.error?.status === 503);
  assert.equal(r.ran.some((e) => e.kind === "requestFinished"), false);
});
