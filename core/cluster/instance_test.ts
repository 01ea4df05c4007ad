// The instance life cycle (issue 23), pure: join, serve, lose the log, rejoin,
// checkpoints, divergence, leave.
import assert from "node:assert/strict";
import { makeConfig } from "../config.ts";
import type { Event } from "../events/event.ts";
import { connectEvent } from "../_testing.ts";
import {
  compareIds,
  initialInstance,
  type InstanceAction,
  type InstanceState,
  type LogEntry,
  route,
  stepInstance,
} from "./instance.ts";
import { type ClusterRecord, encodeRecord } from "./record.ts";
import { initialClusterState } from "./replica.ts";

const config = makeConfig({ drainTimeoutMs: 10_000 });

function fresh(base = "b"): InstanceState {
  return initialInstance(config, initialClusterState(config), base, {
    snapshotEveryMs: 1_000,
    checkpointsKept: 4,
    rejoinRetryMs: 500,
    lostAfterMs: 15_000,
  });
}

let entrySeq = 0;
function entry(ms: number, record: ClusterRecord): LogEntry {
  return { id: `${ms}-${entrySeq++}`, ms, data: encodeRecord(record) };
}

function events(instance: string, seq: number, evs: Event[]): ClusterRecord {
  return { kind: "events", instance, seq, appliedMs: null, events: evs };
}

const tick = (atMs: number): Event => ({ kind: "tick", atMs, unixMs: atMs });

const kinds = (a: InstanceAction[]) => a.map((x) => x.kind);

/** Joined a new log and caught up at once: serving. */
function serving(base = "b"): InstanceState {
  const s = fresh(base);
  assert.deepEqual(
    kinds(stepInstance(s, { kind: "joinRead", epoch: "e1", snapshot: null })),
    ["read"],
  );
  stepInstance(s, { kind: "caughtUp" });
  assert.equal(s.phase, "serving");
  return s;
}

const request = (requestId: string): Event => ({
  kind: "requestReceived",
  atMs: 0,
  requestId,
  api: "openai",
  endpointPath: "/v1/chat/completions",
  model: "m",
  isStreaming: false,
  body: "{}",
  headers: {},
  tenant: "t",
});

const attempt = (workerId: string): Event => connectEvent(workerId);

Deno.test("issue 23 an instance whose log was reset (or lost its tail) ends what it holds, refuses new work (503 cluster_unavailable, handshakes 1013) and retries; the rejoin retires its old id and every socket it held", () => {
  const s = serving();
  s.seq = 3; // it appended under its first id
  const lost = stepInstance(s, {
    kind: "logLost",
    reason: "x",
    reset: true,
    atMs: 0,
  });
  assert.deepEqual(kinds(lost), ["stopReading", "log", "endLocal", "armRetry"]);
  assert.equal(s.phase, "logDown");
  const r = route(s, request("r1"));
  assert.equal(
    r.kind === "refuse" && r.effect.kind === "respondError" &&
      r.effect.error.code,
    "cluster_unavailable",
  );
  const w = route(s, attempt("w1"));
  assert.ok(
    w.kind === "refuse" && w.effect.kind === "rejectWorker" &&
      w.effect.code === 1013,
  );
  assert.equal(route(s, tick(1)).kind, "drop");
  assert.deepEqual(kinds(stepInstance(s, { kind: "retryDue" })), ["join"]);
  // Redis failing again: back to waiting.
  assert.deepEqual(
    kinds(stepInstance(s, { kind: "joinFailed", error: "e", refused: false })),
    ["log", "armRetry"],
  );
  stepInstance(s, { kind: "retryDue" });
  const old = s.id;
  const joined = stepInstance(s, {
    kind: "joinRead",
    epoch: "e1",
    snapshot: null,
  });
  assert.deepEqual(kinds(joined), ["endLocal", "read"]);
  assert.notEqual(s.id, old);
  const up = stepInstance(s, { kind: "caughtUp" });
  assert.deepEqual(kinds(up), ["append", "log", "rejoined"]);
  const left = up[0]!;
  assert.ok(left.kind === "append" && left.record.kind === "left");
  assert.equal(
    left.kind === "append" && left.record.kind === "left" &&
      left.record.who,
    old,
  );
  assert.equal(route(s, request("r2")).kind, "append");
});

Deno.test("issue 23 a log that came back empty (new epoch) starts the replica over and retires nothing", () => {
  const s = serving();
  s.seq = 2;
  stepInstance(s, { kind: "logLost", reason: "x", reset: true, atMs: 0 });
  stepInstance(s, { kind: "retryDue" });
  stepInstance(s, { kind: "joinRead", epoch: "e2", snapshot: null });
  const up = stepInstance(s, { kind: "caughtUp" });
  assert.deepEqual(kinds(up), ["log", "rejoined"]);
  assert.deepEqual(up.at(-1), { kind: "rejoined", fresh: true });
});

Deno.test("issue 23 only the lowest live instance stores checkpoint snapshots, trimming behind its previous one that Redis confirmed; a replica whose digest differs rejoins", () => {
  const a = serving("a");
  const b = serving("b");
  const log: LogEntry[] = [
    entry(1_000, events(a.id, 1, [tick(0)])),
    entry(1_100, events(b.id, 1, [tick(0)])),
    entry(2_000, events(a.id, 2, [tick(0)])),
    entry(3_000, events(b.id, 2, [tick(0)])),
  ];
  const snaps: Record<string, InstanceAction[]> = { a: [], b: [] };
  const notes: InstanceAction[] = [];
  for (const [n, e] of log.entries()) {
    for (const [name, s] of [["a", a], ["b", b]] as const) {
      const put = stepInstance(s, { kind: "entryRead", entry: e }).filter((
        x,
      ) => x.kind === "putSnapshot");
      snaps[name]!.push(...put);
      // Stored, except the second: a write Redis never confirmed.
      for (const x of put) {
        if (x.kind !== "putSnapshot" || n === 2) continue;
        notes.push(...stepInstance(s, {
          kind: "snapshotStored",
          id: x.snapshot.id,
          digest: x.digest,
        }));
      }
    }
  }
  assert.equal(snaps.b!.length, 0, "b is not the lowest");
  // Each trims up to the last one stored, never to one not confirmed.
  assert.deepEqual(
    snaps.a!.map((x) => x.kind === "putSnapshot" ? x.trimBeforeId : "?"),
    [null, log[0]!.id, log[0]!.id],
  );
  const last = snaps.a!.at(-1)!;
  assert.ok(last.kind === "putSnapshot");
  // The writer's digest note agrees with b: nothing happens.
  const note = notes.at(-1)!;
  assert.ok(note.kind === "append");
  const agreed = entry(3_100, note.record);
  assert.deepEqual(
    kinds(stepInstance(b, { kind: "entryRead", entry: agreed })),
    ["effects"],
  );
  // A corrupted digest makes b rejoin.
  const bad = entry(3_200, {
    kind: "note",
    instance: a.id,
    seq: 9,
    appliedMs: null,
    note: { t: "digest", id: last.snapshot.id, digest: "00000000" },
  });
  assert.deepEqual(
    kinds(stepInstance(b, { kind: "entryRead", entry: bad })),
    ["effects", "stopReading", "log", "endLocal", "armRetry"],
  );
  assert.equal(b.phase, "logDown");
});

Deno.test("issue 23 leaving: new requests meet the core's 503 shutting_down, the instance waits for its own requests until the core's drain timeout in log time, then says it left", () => {
  const s = serving();
  stepInstance(s, {
    kind: "entryRead",
    entry: entry(1_000, events(s.id, 1, [request("r1")])),
  });
  const leave = stepInstance(s, { kind: "leaveRequested" });
  assert.deepEqual(kinds(leave), ["log", "append"]);
  const mark = leave[1]!;
  assert.ok(mark.kind === "append");
  stepInstance(s, { kind: "entryRead", entry: entry(1_100, mark.record) });
  assert.equal(s.phase, "leaving");
  const r = route(s, request("r2"));
  assert.ok(r.kind === "refuse" && r.effect.kind === "respondError");
  assert.equal(
    r.kind === "refuse" && r.effect.kind === "respondError" &&
      r.effect.error.code,
    "shutting_down",
  );
  assert.equal(route(s, tick(0)).kind, "append");
  // Still its request: not yet.
  const early = stepInstance(s, {
    kind: "entryRead",
    entry: entry(5_000, events(s.id, 2, [tick(0)])),
  });
  assert.ok(!early.some((x) => x.kind === "left"));
  // The drain timeout (10 s of log time) passed.
  const late = stepInstance(s, {
    kind: "entryRead",
    entry: entry(11_500, events(s.id, 3, [tick(0)])),
  });
  assert.deepEqual(kinds(late).slice(-4), [
    "append",
    "stopReading",
    "endLocal",
    "left",
  ]);
  assert.equal(s.phase, "gone");
});

Deno.test("issue 23 leaving with nothing held leaves once its leave mark came back through the log (what it observed before is then in its replica); leaving while the log is down leaves without appending", () => {
  const s = serving();
  const leave = stepInstance(s, { kind: "leaveRequested" });
  assert.deepEqual(kinds(leave), ["log", "append"]);
  const mark = leave[1]!;
  assert.ok(mark.kind === "append");
  // Not before its mark is read back: a request it saw may be on its way.
  assert.deepEqual(
    kinds(
      stepInstance(s, { kind: "entryRead", entry: entry(1_100, mark.record) }),
    ).slice(-4),
    ["append", "stopReading", "endLocal", "left"],
  );
  const d = serving();
  stepInstance(d, { kind: "logLost", reason: "x", reset: true, atMs: 0 });
  assert.deepEqual(kinds(stepInstance(d, { kind: "leaveRequested" })), [
    "stopReading",
    "endLocal",
    "left",
  ]);
});

Deno.test("issue 23 the fleet declaring this instance gone gives it a new id and ends what it held", () => {
  const s = serving();
  const other = "z.0";
  stepInstance(s, {
    kind: "entryRead",
    entry: entry(1_000, events(s.id, 1, [tick(0)])),
  });
  const old = s.id;
  const out = stepInstance(s, {
    kind: "entryRead",
    entry: entry(1_100, {
      kind: "left",
      instance: other,
      seq: 1,
      appliedMs: null,
      who: old,
    }),
  });
  assert.ok(kinds(out).includes("endLocal"));
  assert.notEqual(s.id, old);
  assert.equal(s.phase, "serving");
});

Deno.test("issue 23 a log that stops answering is held: new work refused, what is held kept; back within CLUSTER_LOG_LOST_MS the instance resumes under its id and appends what it held, later it gives up and rejoins", () => {
  const s = serving();
  s.seq = 2;
  const id = s.id;
  const held = stepInstance(s, {
    kind: "logLost",
    reason: "silent",
    reset: false,
    atMs: 1_000,
  });
  assert.deepEqual(kinds(held), [
    "stopReading",
    "log",
    "refuseUnadmitted",
    "armRetry",
  ]);
  assert.equal(s.phase, "holding");
  assert.equal(route(s, request("r1")).kind, "refuse");
  assert.equal(route(s, attempt("w1")).kind, "refuse");
  assert.equal(route(s, tick(1)).kind, "drop");
  assert.equal(
    route(s, {
      kind: "workerDisconnected",
      atMs: 0,
      workerId: "w0",
      reason: "x",
    }).kind,
    "append",
    "what in-flight work reports is kept for the log",
  );
  assert.deepEqual(kinds(stepInstance(s, { kind: "retryDue" })), ["resume"]);
  assert.deepEqual(
    kinds(stepInstance(s, { kind: "resumeFailed", error: "e", atMs: 5_000 })),
    ["armRetry"],
  );
  assert.deepEqual(
    kinds(
      stepInstance(s, {
        kind: "resumeRead",
        epoch: "e1",
        lastEntryKept: true,
        atMs: 6_000,
      }),
    ),
    ["read"],
  );
  assert.deepEqual(kinds(stepInstance(s, { kind: "caughtUp" })), [
    "log",
    "resend",
  ]);
  assert.equal(s.phase, "serving");
  assert.equal(s.id, id, "resumed under its own id");
  // Held too long: it gives up what it holds and rejoins.
  stepInstance(s, { kind: "logLost", reason: "silent", reset: false, atMs: 0 });
  const gaveUp = stepInstance(s, {
    kind: "resumeFailed",
    error: "e",
    atMs: 15_001,
  });
  assert.deepEqual(kinds(gaveUp), [
    "stopReading",
    "log",
    "endLocal",
    "armRetry",
  ]);
  assert.equal(s.phase, "logDown");
});

Deno.test("issue 23 after a rejoin the snapshot writer trims only up to the snapshot the join found, never one it wrote before (a failover may have lost it)", () => {
  const s = serving("a");
  stepInstance(s, {
    kind: "entryRead",
    entry: entry(1_000, events(s.id, 1, [tick(0)])),
  });
  const first = stepInstance(s, {
    kind: "entryRead",
    entry: entry(2_000, events(s.id, 2, [tick(0)])),
  }).find((x) => x.kind === "putSnapshot");
  assert.ok(first?.kind === "putSnapshot");
  // The log loses its tail, this snapshot with it; the join finds an older one.
  stepInstance(s, { kind: "logLost", reason: "x", reset: true, atMs: 0 });
  stepInstance(s, { kind: "retryDue" });
  stepInstance(s, {
    kind: "joinRead",
    epoch: "e1",
    snapshot: null,
  });
  stepInstance(s, { kind: "caughtUp" });
  const next = stepInstance(s, {
    kind: "entryRead",
    entry: entry(3_000, events(s.id, 1, [tick(0)])),
  }).find((x) => x.kind === "putSnapshot");
  assert.ok(next?.kind === "putSnapshot");
  assert.equal(next.trimBeforeId, null, "nothing to trim up to");
});

Deno.test("compareIds orders stream ids as numbers: ms first, then seq; a bare 0 is the start", () => {
  assert.ok(compareIds("9-0", "10-0") < 0);
  assert.ok(compareIds("10-2", "10-10") < 0);
  assert.ok(compareIds("10-3", "10-3") === 0);
  assert.ok(compareIds("0", "1-0") < 0);
  assert.ok(compareIds("5-1", "5") > 0);
});
