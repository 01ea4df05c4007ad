// Properties of the cluster replica (issue 16) over random logs: a retried
// append changes nothing, and a snapshot at any position plus the log's tail
// is the same state as a full replay.
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  applyRecord,
  type ClusterRecord,
  type ClusterState,
  decodeSnapshot,
  encodeSnapshot,
  initialClusterState,
  stateDigest,
} from "../../core/cluster/mod.ts";
import { type Event, makeConfig } from "../../core/mod.ts";

const config = makeConfig({
  rateLimits: { rl: { limit: 3, windowMs: 10_000 } },
});
const INSTANCES = ["A", "B", "C"];

type Step = {
  instance: number;
  what: number;
  n: number;
  dtMs: number;
  dup: boolean;
};

const stepArb: fc.Arbitrary<Step> = fc.record({
  instance: fc.integer({ min: 0, max: 2 }),
  what: fc.integer({ min: 0, max: 8 }),
  n: fc.integer({ min: 0, max: 5 }),
  dtMs: fc.oneof(
    fc.integer({ min: 0, max: 300 }),
    fc.integer({ min: 0, max: 6_000 }),
  ),
  dup: fc.boolean(),
});

/** A log from steps: each step one record; `dup` appends the record again later. */
function logOf(steps: Step[]): { record: ClusterRecord; atMs: number }[] {
  const out: { record: ClusterRecord; atMs: number }[] = [];
  const seqs = [0, 0, 0];
  let t = 1_000;
  let requests = 0;
  const retries: { record: ClusterRecord; atMs: number }[] = [];
  for (const s of steps) {
    t += s.dtMs;
    const inst = INSTANCES[s.instance]!;
    const w = `w${s.instance}-${s.n % 3}`;
    const events: Event[] = [];
    switch (s.what) {
      case 0:
        events.push({
          kind: "workerConnectAttempted",
          atMs: 0,
          workerId: w,
          provider: "local",
          clientIp: "10.0.0.1",
          secretValid: true,
        }, {
          kind: "registerReceived",
          atMs: 0,
          workerId: w,
          workerName: w,
          models: ["m"],
          maxConcurrent: 1 + (s.n % 2),
          protocolVersion: "2026-04-bridge-v1",
          currentLoad: 0,
        });
        break;
      case 1:
      case 2:
        events.push({
          kind: "requestReceived",
          atMs: 0,
          requestId: `q${requests++}`,
          api: "openai",
          endpointPath: "/v1/chat/completions",
          model: "m",
          isStreaming: s.what === 1,
          body: '{"model":"m"}',
          headers: {},
          tenant: s.n % 2 === 0 ? "rl" : "t",
        });
        break;
      case 3:
        events.push({
          kind: "chunkReceived",
          atMs: 0,
          workerId: w,
          requestId: `q${Math.max(0, requests - 1 - s.n)}`,
          chunk: `data: ${s.n}\n\n`,
        });
        break;
      case 4:
        events.push({
          kind: "completeReceived",
          atMs: 0,
          workerId: w,
          requestId: `q${Math.max(0, requests - 1 - s.n)}`,
          statusCode: 200,
          headers: {},
          body: "",
          tokenCounts: null,
        });
        break;
      case 5:
        events.push({
          kind: "clientDisconnected",
          atMs: 0,
          requestId: `q${Math.max(0, requests - 1 - s.n)}`,
        });
        break;
      case 6:
        events.push({
          kind: "workerDisconnected",
          atMs: 0,
          workerId: w,
          reason: "gone",
        });
        break;
      default:
        events.push({ kind: "tick", atMs: 0, unixMs: t });
    }
    const record: ClusterRecord = {
      kind: "events",
      instance: inst,
      seq: ++seqs[s.instance]!,
      appliedMs: null,
      events,
    };
    // A retry lands after the instance's later records were sent: it is a
    // duplicate, not a reordering.
    for (const x of retries.splice(0)) out.push({ ...x, atMs: t });
    out.push({ record, atMs: t });
    if (s.dup) retries.push({ record, atMs: t });
  }
  return out;
}

function replay(
  cs: ClusterState,
  log: { record: ClusterRecord; atMs: number }[],
): ClusterState {
  for (const e of log) {
    try {
      applyRecord(cs, structuredClone(e.record), e.atMs);
    } catch {
      // A record the core refuses is refused the same way on every replay.
    }
  }
  return cs;
}

Deno.test("cluster property: retried appends (same instance and sequence number) leave the state as if sent once", () => {
  fc.assert(
    fc.property(fc.array(stepArb, { maxLength: 80 }), (steps) => {
      const withDups = logOf(steps);
      const once = logOf(steps.map((s) => ({ ...s, dup: false })));
      assert.equal(
        stateDigest(replay(initialClusterState(config), withDups)),
        stateDigest(replay(initialClusterState(config), once)),
      );
    }),
    { seed: 16, numRuns: 300 },
  );
});

Deno.test("cluster property: a snapshot at any position plus the tail equals a full replay", () => {
  fc.assert(
    fc.property(
      fc.array(stepArb, { maxLength: 80 }),
      fc.nat(),
      (steps, cut) => {
        const log = logOf(steps);
        const k = log.length === 0 ? 0 : cut % (log.length + 1);
        const full = replay(initialClusterState(config), log);
        const head = replay(initialClusterState(config), log.slice(0, k));
        const joined = replay(
          decodeSnapshot(encodeSnapshot(head)),
          log.slice(k),
        );
        assert.equal(stateDigest(joined), stateDigest(full));
      },
    ),
    { seed: 16, numRuns: 300 },
  );
});
