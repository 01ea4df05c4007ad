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
  applyRecord,
  type ClusterState,
  initialClusterState,
} from "./replica.ts";
import type { ClusterRecord } from "./record.ts";
import { decodeSnapshot, encodeSnapshot, stateDigest } from "./snapshot.ts";

const config = makeConfig({});

/** A tiny log: records appended by instances, applied in order by any number of replicas. */
function log() {
  const entries: { record: ClusterRecord; atMs: number }[] = [];
  const seqs = new Map<string, number>();
  return {
    entries,
    append(instance: string, atMs: number, events: Event[]): ClusterRecord {
      const seq = (seqs.get(instance) ?? 0) + 1;
      seqs.set(instance, seq);
      const record: ClusterRecord = {
        kind: "events",
        instance,
        seq,
        appliedMs: null,
        events,
      };
      entries.push({ record, atMs });
      return record;
    },
  };
}

/** Applies entries from `from` on; copies the record (replicas mutate event times). */
function replay(
  cs: ClusterState,
  entries: { record: ClusterRecord; atMs: number }[],
  from = 0,
): Effect[] {
  const out: Effect[] = [];
  for (const e of entries.slice(from)) {
    out.push(...applyRecord(cs, structuredClone(e.record), e.atMs).effects);
  }
  return out;
}

const connect = (workerId: string): Event => connectEvent(workerId);
const request = (requestId: string, stream = true): Event =>
  requestReceived(requestId, { stream });
const tick: Event = { kind: "tick", atMs: 0 };
const chunk = (workerId: string, requestId: string): Event => ({
  kind: "chunkReceived",
  atMs: 0,
  workerId,
  requestId,
  chunk: "data: x\n\n",
});

/** Instance B holds worker w1 (max 1); A holds clients. */
function fleet() {
  const l = log();
  l.append("A", 1000, [tick]);
  l.append("B", 1001, [connect("w1"), { ...register("w1"), maxConcurrent: 1 }]);
  return l;
}

Deno.test("cluster: replicas that apply the same log agree on the state digest at every position", () => {
  const l = fleet();
  l.append("A", 1010, [request("r1"), request("r2")]);
  l.append("B", 1020, [chunk("w1", "r1")]);
  l.append("A", 1030, [{
    kind: "clientDisconnected",
    atMs: 0,
    requestId: "r2",
  }]);
  const one = initialClusterState(config);
  const two = initialClusterState(config);
  for (const e of l.entries) {
    applyRecord(one, structuredClone(e.record), e.atMs);
    applyRecord(two, structuredClone(e.record), e.atMs);
    assert.equal(stateDigest(one), stateDigest(two));
  }
});

Deno.test("cluster: the log's time is every event's time, whatever the instance stamped", () => {
  const l = fleet();
  const r = request("r1");
  r.atMs = 99_999_999;
  l.append("A", 1010, [r]);
  const cs = initialClusterState(config);
  replay(cs, l.entries);
  assert.equal(cs.core.nowMs, 1010);
  assert.equal(cs.core.requests.get("r1")?.arrivedAtMs, 1010);
});

Deno.test("cluster: a retried append (same instance and sequence number) is applied once", () => {
  const l = fleet();
  const dup = l.append("A", 1010, [request("r1")]);
  l.entries.push({ record: dup, atMs: 1011 });
  const cs = initialClusterState(config);
  const effects = replay(cs, l.entries);
  assert.equal(cs.core.requests.size, 1);
  assert.equal(
    effects.filter((e) =>
      e.kind === "sendToWorker" && e.message.type === "request"
    ).length,
    1,
    "dispatched once",
  );
});

Deno.test("cluster: an instance silent for deadAfterMs dies: its clients' requests are cancelled on their workers", () => {
  const l = fleet();
  l.append("A", 1010, [request("r1")]);
  l.append("B", 1020, [chunk("w1", "r1")]);
  // A freezes; B keeps ticking.
  for (let t = 1250; t <= 5500; t += 250) l.append("B", t, [tick]);
  const cs = initialClusterState(config);
  const effects = replay(cs, l.entries);
  assert.ok(cs.dead.has("A"));
  assert.equal(cs.core.requests.size, 0);
  const cancel = effects.find((e) =>
    e.kind === "sendToWorker" && e.message.type === "cancel"
  );
  assert.ok(cancel, "the worker on B was told to cancel");
  // Records A sends after its death are ignored.
  const before = stateDigest(cs);
  applyRecord(cs, {
    kind: "events",
    instance: "A",
    seq: 99,
    appliedMs: null,
    events: [request("late")],
  }, 6000);
  assert.equal(cs.core.requests.has("late"), false);
  assert.notEqual(before, ""); // digest computed: state is serializable
});

Deno.test("cluster: when the worker's instance dies before the first byte, its request is requeued with its original deadline", () => {
  const l = fleet();
  l.append("A", 1010, [request("r1", false)]);
  const cs = initialClusterState(config);
  replay(cs, l.entries);
  const deadline = cs.core.requests.get("r1")!.deadlineAtMs;
  assert.equal(cs.core.requests.get("r1")!.status.kind, "dispatched");
  // B freezes; A keeps ticking.
  const more = log();
  for (let t = 1250; t <= 5500; t += 250) {
    more.entries.push({
      record: {
        kind: "events",
        instance: "A",
        seq: 100 + t,
        appliedMs: null,
        events: [tick],
      },
      atMs: t,
    });
  }
  replay(cs, more.entries);
  assert.ok(cs.dead.has("B"));
  const r = cs.core.requests.get("r1")!;
  assert.equal(r.status.kind, "queued");
  assert.equal(r.requeueCount, 1);
  assert.equal(r.deadlineAtMs, deadline);
  assert.equal(cs.core.workers.size, 0);
});

Deno.test("cluster: when the worker's instance dies after the first byte, the stream ends with an error", () => {
  const l = fleet();
  l.append("A", 1010, [request("r1")]);
  l.append("B", 1020, [chunk("w1", "r1")]);
  l.append("B", 1030, [{ kind: "tick", atMs: 0 }]);
  for (let t = 1250; t <= 5500; t += 250) l.append("A", t, [tick]);
  const cs = initialClusterState(config);
  const effects = replay(cs, l.entries);
  const end = effects.find((e) => e.kind === "endStream");
  assert.ok(end?.kind === "endStream" && end.error !== null);
  assert.equal(cs.core.requests.size, 0);
});

Deno.test("cluster: a gap in the log (the engine was down) blames no instance", () => {
  const l = fleet();
  l.append("A", 30_000, [tick]);
  const cs = initialClusterState(config);
  replay(cs, l.entries);
  assert.equal(cs.dead.size, 0);
  assert.equal(cs.core.workers.size, 1);
});

Deno.test("cluster: an instance whose records show it far behind the log is declared dead", () => {
  const l = fleet();
  for (let t = 1250; t <= 4750; t += 250) l.append("A", t, [tick]);
  const stale: ClusterRecord = {
    kind: "events",
    instance: "B",
    seq: 50,
    appliedMs: 1001,
    events: [tick],
  };
  l.entries.push({ record: stale, atMs: 4800 });
  const cs = initialClusterState(config);
  replay(cs, l.entries);
  assert.ok(cs.dead.has("B"));
});

Deno.test("cluster: a snapshot at position k plus the tail gives the same digest as a full replay", () => {
  const l = fleet();
  l.append("A", 1010, [request("r1"), request("r2"), request("r3")]);
  l.append("B", 1020, [chunk("w1", "r1")]);
  l.append("A", 1300, [tick]);
  l.append("B", 1310, [completeEvent("w1", "r1")]);
  l.append("A", 1400, [tick]);
  for (let k = 0; k <= l.entries.length; k++) {
    const full = initialClusterState(config);
    replay(full, l.entries);
    const head = initialClusterState(config);
    replay(head, l.entries.slice(0, k));
    const joined = decodeSnapshot(encodeSnapshot(head));
    replay(joined, l.entries, k);
    assert.equal(stateDigest(joined), stateDigest(full), `snapshot at ${k}`);
  }
});

Deno.test("cluster: an instance that leaves takes the death path at once", () => {
  const l = fleet();
  l.append("A", 1010, [request("r1")]);
  l.entries.push({
    record: {
      kind: "left",
      instance: "B",
      seq: 10,
      appliedMs: null,
      who: "B",
    },
    atMs: 1020,
  });
  const cs = initialClusterState(config);
  replay(cs, l.entries);
  assert.ok(cs.dead.has("B"));
  assert.equal(cs.core.workers.size, 0);
  assert.equal(cs.core.requests.get("r1")?.status.kind, "queued");
});

Deno.test("cluster: records queued while the log stalled do not make their instance look behind", () => {
  const l = fleet();
  l.append("A", 1250, [tick]);
  // The log stalls for 5 s; B's queued records land together when it resumes,
  // each saying B had applied everything up to the stall.
  const cs = initialClusterState(config);
  replay(cs, l.entries);
  for (let seq = 10; seq < 14; seq++) {
    applyRecord(cs, {
      kind: "events",
      instance: "B",
      seq,
      appliedMs: 1250,
      events: [{ kind: "tick", atMs: 0 }],
    }, 6250);
  }
  assert.equal(cs.dead.size, 0);
  assert.equal(cs.core.workers.size, 1);
});
