// The cluster simulator (issue 16): N virtual relay instances share one virtual
// log, each applying every record to its own replica (core/cluster) and carrying
// out only the effects for the sockets it holds, exactly as
// shell/server/cluster/runtime.ts does. Virtual workers and clients attach to
// instances; seeded faults crash or freeze instances, duplicate appends, stall
// the log, or wipe it. Fleet-wide invariants are checked as the run goes.
import {
  applyRecord,
  type ClusterRecord,
  type ClusterState,
  decodeRecord,
  encodeRecord,
  initialClusterState,
  stateDigest,
} from "../core/cluster/mod.ts";
import {
  chunkAsText,
  type Effect,
  type Event,
  EXTENSION_CHUNK_BYTES,
  makeConfig,
  piecesAsText,
} from "../core/mod.ts";
import { EventQueue } from "./event_queue.ts";
import { Prng } from "./prng.ts";

export type ClusterFault =
  | "crash"
  | "stall"
  | "duplicate"
  | "logStall"
  | "blip"
  | "reset";
export const CLUSTER_FAULTS: readonly ClusterFault[] = [
  "crash",
  "stall",
  "duplicate",
  "logStall",
  "blip",
  "reset",
];

/** Deliberately broken cluster runtimes: the invariants must catch each one. */
export type ClusterMutant =
  | "noDedup"
  | "noLiveness"
  | "everyoneExecutes"
  | "applyTimeClock";
export const CLUSTER_MUTANTS: readonly ClusterMutant[] = [
  "noDedup",
  "noLiveness",
  "everyoneExecutes",
  "applyTimeClock",
];

export type ClusterScenario = {
  seed: bigint;
  instances: number;
  workers: number;
  requests: number;
  faults: ClusterFault[];
  /** Tenant "rl" is limited to RATE_LIMIT admissions per minute. */
  rateLimited: boolean;
};

export type ClusterInvariant =
  | "replicasAgree"
  | "socketEffectsOnce"
  | "fleetRateLimit"
  | "noHangOnInstanceDeath"
  | "endsOnce"
  | "streamExact"
  | "coreAccepts";

export type ClusterRun = {
  violations: { invariant: ClusterInvariant; detail: string }[];
  stats: {
    entries: number;
    deaths: number;
    rejoins: number;
    ended: number;
    digestChecks: number;
  };
};

const RATE_LIMIT = 5;
const TICK_MS = 250;
const ARRIVALS_UNTIL_MS = 20_000;
const FAULTS_FROM_MS = 2_000;
const FAULTS_UNTIL_MS = 18_000;
const END_MS = 60_000;
const DIGEST_EVERY = 16;
const START_MS = 1_000;
/**
 * Every request ends (answer, error, or its client gone) this soon after it
 * arrived, faults included: a queued request times out at 30 s (504) at the
 * latest, and a dead instance's dispatched requests are requeued within 4 s of
 * log time. A request stuck on a dead instance's worker until the 45 s
 * heartbeat timeout notices breaks it. (Compound faults, say a crash, a freeze
 * and a log stall together, can legitimately leave no worker for ~10 s.)
 */
const END_WITHIN_MS = 35_000;

type Inst = {
  idx: number;
  id: string;
  incarnation: number;
  mode: "up" | "crashed" | "frozen" | "down";
  cs: ClusterState;
  epoch: number;
  cursor: number;
  seq: number;
  appliedMs: number | null;
  outbox: Event[];
  flushQueued: boolean;
  /** One connection's appends land in the order they were sent (Redis, TCP). */
  lastAppendAtMs: number;
  /** The log epoch and id this instance had when it lost the engine. */
  lostFrom: { epoch: number; id: string } | null;
  conns: Set<string>;
  clients: Set<string>;
};

type Client = {
  id: string;
  inst: number;
  tenant: string;
  stream: boolean;
  arrivedAtMs: number;
  endedAtMs: number | null;
  connected: boolean;
  started: boolean;
  received: string;
  ends: number;
  status: number | null;
  error: boolean;
};

type Conn = { id: string; worker: number; inst: number; open: boolean };

const UTF8 = new TextEncoder();

type Action =
  | { k: "tick"; i: number }
  | { k: "poll"; i: number }
  | { k: "flush"; i: number }
  | { k: "append"; data: string; epoch: number }
  | { k: "drain" }
  | { k: "connect"; w: number }
  | { k: "job"; conn: string; requestId: string; step: number }
  | { k: "arrive"; n: number }
  | { k: "abort"; requestId: string }
  | { k: "fault"; fault: ClusterFault }
  | { k: "thaw"; i: number }
  | { k: "rejoin"; i: number };

/** A scenario drawn from a seed: 2-3 instances, 2-4 workers, a random subset of faults. */
export function clusterScenario(seed: bigint): ClusterScenario {
  const p = Prng.fromSeed(seed);
  return {
    seed,
    instances: p.chance(4, 5) ? 3 : 2,
    workers: p.int(2, 4),
    requests: p.int(20, 60),
    faults: CLUSTER_FAULTS.filter(() => p.chance(1, 2)),
    rateLimited: p.chance(1, 2),
  };
}

export function runCluster(
  s: ClusterScenario,
  mutant: ClusterMutant | null = null,
  /** Receives one line per notable step (the CLI's --one --trace). */
  trace: ((line: string) => void) | null = null,
): ClusterRun {
  const prng = Prng.fromSeed(s.seed ^ 0x5eedn);
  const config = makeConfig({
    defaultRateLimit: null,
    rateLimits: s.rateLimited
      ? { rl: { limit: RATE_LIMIT, windowMs: 60_000 } }
      : {},
  });
  const liveness = mutant === "noLiveness"
    ? { deadAfterMs: 1e12, lagMaxMs: 1e12, logGapMs: 2_000 }
    : undefined;
  const queue = new EventQueue<Action>();
  const violations: ClusterRun["violations"] = [];
  const stats = {
    entries: 0,
    deaths: 0,
    rejoins: 0,
    ended: 0,
    digestChecks: 0,
  };
  const violate = (invariant: ClusterInvariant, detail: string) => {
    if (violations.length < 20) violations.push({ invariant, detail });
  };
  let now = START_MS;
  const log = {
    epoch: 0,
    entries: [] as { data: string; atMs: number }[],
    stalledUntil: 0,
    /** Appends that arrived while the log stalled, in arrival order (one FIFO, as a Redis connection is). */
    waiting: [] as string[],
    drainQueued: false,
  };
  const digests = new Map<string, string>();
  const executed = new Map<string, number>();
  const conns = new Map<string, Conn>();
  const clients = new Map<string, Client>();
  /** Requests of tenant "rl" that reached a worker, per log epoch (a wiped log forgets its windows). */
  const dispatchedRl = new Map<number, Set<string>>();
  let connSeq = 0;

  const fresh = (i: number, incarnation: number): Inst => ({
    idx: i,
    id: `i${i}.${incarnation}`,
    incarnation,
    mode: "up",
    cs: initialClusterState(config, liveness),
    epoch: log.epoch,
    cursor: 0,
    seq: 0,
    appliedMs: null,
    outbox: [],
    flushQueued: false,
    lastAppendAtMs: 0,
    lostFrom: null,
    conns: new Set(),
    clients: new Set(),
  });
  const insts: Inst[] = [];
  for (let i = 0; i < s.instances; i++) insts.push(fresh(i, 0));
  const up = () => insts.filter((x) => x.mode === "up");

  // ---- instance side ---------------------------------------------------------
  function submit(inst: Inst, e: Event): void {
    if (inst.mode !== "up") {
      if (e.kind === "requestReceived") {
        endClient(e.requestId, 503, true); // cluster_unavailable, answered locally
      }
      return;
    }
    inst.outbox.push(e);
    if (!inst.flushQueued) {
      inst.flushQueued = true;
      queue.push(now, { k: "flush", i: inst.idx });
    }
  }

  function flush(inst: Inst): void {
    inst.flushQueued = false;
    if (inst.mode !== "up" || inst.outbox.length === 0) return;
    const record: ClusterRecord = {
      kind: "events",
      instance: inst.id,
      seq: ++inst.seq,
      appliedMs: inst.appliedMs,
      events: inst.outbox,
    };
    inst.outbox = [];
    const data = encodeRecord(record);
    const at = Math.max(inst.lastAppendAtMs, now + prng.int(0, 3));
    inst.lastAppendAtMs = at;
    queue.push(at, { k: "append", data, epoch: inst.epoch });
    if (s.faults.includes("duplicate") && prng.chance(1, 15)) {
      // A client retry after a lost reply: the same record lands twice.
      queue.push(at + prng.int(1, 20), {
        k: "append",
        data,
        epoch: inst.epoch,
      });
    }
  }

  function poll(inst: Inst): void {
    if (inst.mode !== "up" || now < log.stalledUntil) return;
    if (inst.epoch !== log.epoch) return lose(inst, now); // wiped while it was frozen
    while (inst.cursor < log.entries.length && inst.mode === "up") {
      applyAt(inst, inst.cursor++, false);
    }
  }

  function applyAt(inst: Inst, p: number, quiet: boolean): void {
    const entry = log.entries[p]!;
    const record = decodeRecord(entry.data);
    inst.appliedMs = entry.atMs;
    if (mutant === "noDedup") {
      const view = inst.cs.instances.get(record.instance);
      if (view !== undefined && record.seq <= view.seq) {
        view.seq = record.seq - 1;
      }
    }
    // The mutant stamps events with each replica's own reading time.
    const atMs = mutant === "applyTimeClock" ? now + inst.idx : entry.atMs;
    let applied;
    try {
      applied = applyRecord(inst.cs, record, atMs);
    } catch (e) {
      violate("coreAccepts", `replica ${inst.id} at ${p}: ${e}`);
      return;
    }
    if (!quiet) {
      applied.effects.forEach((effect, n) =>
        execute(inst, effect, `${inst.epoch}:${p}:${n}`)
      );
    }
    if ((p + 1) % DIGEST_EVERY === 0) {
      const key = `${inst.epoch}:${p}`;
      const d = stateDigest(inst.cs);
      const seen = digests.get(key);
      stats.digestChecks++;
      if (seen === undefined) digests.set(key, d);
      else if (seen !== d) {
        violate(
          "replicasAgree",
          `replica ${inst.id} at ${key}: ${d} ≠ ${seen}`,
        );
      }
    }
    stats.deaths += applied.died.length;
    if (applied.died.length > 0 && !quiet) {
      trace?.(`${now} ${inst.id} applies ${p}: dead ${applied.died}`);
    }
    if (applied.died.includes(inst.id)) selfDied(inst);
  }

  /** The shell's `run`: only effects for sockets this instance holds do anything. */
  function execute(inst: Inst, effect: Effect, key: string): void {
    const all = mutant === "everyoneExecutes";
    switch (effect.kind) {
      case "sendToWorker":
      case "closeWorker":
      case "rejectWorker": {
        if (!all && !inst.conns.has(effect.workerId)) return;
        const conn = conns.get(effect.workerId);
        if (conn === undefined || !conn.open) return;
        count(key);
        if (effect.kind !== "sendToWorker") return closeConn(conn, true);
        const m = effect.message;
        if (m.type === "request") {
          trace?.(`${now} ${inst.id} sends ${m.request_id} to ${conn.id}`);
          const r = clients.get(m.request_id);
          if (r?.tenant === "rl") {
            const set = dispatchedRl.get(inst.epoch) ?? new Set();
            set.add(m.request_id);
            dispatchedRl.set(inst.epoch, set);
          }
          queue.push(now + prng.int(5, 40), {
            k: "job",
            conn: conn.id,
            requestId: m.request_id,
            step: 0,
          });
        } else if (m.type === "cancel") {
          jobsCancelled.add(`${conn.id}/${m.request_id}`);
        } else if (m.type === "ping") {
          submit(insts[conn.inst]!, {
            kind: "pongReceived",
            atMs: now,
            workerId: conn.id,
            currentLoad: null,
          });
        }
        return;
      }
      case "startStream":
      case "writeChunk":
      case "endStream":
      case "respond":
      case "respondError": {
        if (!all && !inst.clients.has(effect.requestId)) return;
        const c = clients.get(effect.requestId);
        if (c === undefined || !c.connected) return;
        count(key);
        if (effect.kind === "startStream") c.started = true;
        else if (effect.kind === "writeChunk") {
          c.received += chunkAsText(effect.chunk);
        } else if (effect.kind === "endStream") {
          endClient(c.id, 200, effect.error !== null);
        } else if (effect.kind === "respond") {
          c.received = piecesAsText(effect.bodyPieces ?? [], effect.body);
          endClient(c.id, effect.status, false);
        } else endClient(c.id, effect.error.status, true);
        return;
      }
      default:
        return;
    }
  }

  function count(key: string): void {
    const n = (executed.get(key) ?? 0) + 1;
    executed.set(key, n);
    if (n > 1) violate("socketEffectsOnce", `effect ${key} ran ${n} times`);
  }

  /** The fleet declared this instance gone (it froze): drop everything, rejoin under a new id. */
  function selfDied(inst: Inst): void {
    inst.id = `i${inst.idx}.${++inst.incarnation}`;
    inst.seq = 0;
    stats.rejoins++;
    dropLocal(inst);
  }

  function dropLocal(inst: Inst): void {
    for (const r of [...inst.clients]) endClient(r, 503, true);
    inst.clients.clear();
    for (const id of [...inst.conns]) {
      const c = conns.get(id);
      if (c !== undefined) closeConn(c, true);
    }
  }

  /** Engine loss seen by this instance: refuse, drop its sockets, rejoin when the log is back. */
  function lose(inst: Inst, backAtMs: number): void {
    if (inst.mode !== "up") return;
    trace?.(`${now} ${inst.id} loses the engine until ${backAtMs}`);
    inst.lostFrom = { epoch: inst.epoch, id: inst.id };
    inst.mode = "down";
    inst.outbox = [];
    dropLocal(inst);
    queue.push(backAtMs + prng.int(0, 500), { k: "rejoin", i: inst.idx });
  }

  function rejoin(inst: Inst): void {
    if (inst.mode !== "down") return;
    trace?.(
      `${now} ${inst.id} rejoins (log epoch ${log.epoch}, ${log.entries.length} entries)`,
    );
    const next = fresh(inst.idx, inst.incarnation + 1);
    insts[inst.idx] = next;
    stats.rejoins++;
    // Catch up quietly: it holds no socket yet.
    while (next.cursor < log.entries.length) {
      applyAt(next, next.cursor++, true);
    }
    // The log survived: retire the old id at once (the shell's `left`).
    if (inst.lostFrom !== null && inst.lostFrom.epoch === log.epoch) {
      const record: ClusterRecord = {
        kind: "left",
        instance: next.id,
        seq: ++next.seq,
        appliedMs: next.appliedMs,
        who: inst.lostFrom.id,
      };
      next.lastAppendAtMs = now + 1;
      queue.push(now + 1, {
        k: "append",
        data: encodeRecord(record),
        epoch: next.epoch,
      });
    }
    schedulePoll(next);
    queue.push(now + TICK_MS, { k: "tick", i: next.idx });
  }

  function schedulePoll(inst: Inst): void {
    queue.push(now + prng.int(1, 15), { k: "poll", i: inst.idx });
  }

  // ---- workers and clients ---------------------------------------------------
  const jobsCancelled = new Set<string>();

  function closeConn(conn: Conn, reconnect: boolean): void {
    if (!conn.open) return;
    conn.open = false;
    insts[conn.inst]?.conns.delete(conn.id);
    if (reconnect) {
      queue.push(now + prng.int(300, 1500), { k: "connect", w: conn.worker });
    }
  }

  function connect(w: number): void {
    const candidates = up();
    if (candidates.length === 0) {
      queue.push(now + 500, { k: "connect", w });
      return;
    }
    const inst = prng.pick(candidates);
    trace?.(`${now} worker ${w} connects to ${inst.id}`);
    const conn: Conn = {
      id: `w${w}c${++connSeq}`,
      worker: w,
      inst: inst.idx,
      open: true,
    };
    conns.set(conn.id, conn);
    inst.conns.add(conn.id);
    submit(inst, {
      kind: "workerConnectAttempted",
      atMs: now,
      workerId: conn.id,
      provider: "local",
      clientIp: "10.0.0.1",
      secretValid: true,
    });
    submit(inst, {
      kind: "registerReceived",
      atMs: now,
      workerId: conn.id,
      workerName: `w${w}`,
      models: ["m"],
      maxConcurrent: 2,
      protocolVersion: "2026-04-bridge-v1",
      currentLoad: 0,
      // Odd workers stream bytes (chunk-bytes-v1, issue 18): the log's record
      // codec carries them to every replica.
      ...(w % 2 === 1 ? { extensions: [EXTENSION_CHUNK_BYTES] } : {}),
    });
  }

  function job(a: Extract<Action, { k: "job" }>): void {
    const conn = conns.get(a.conn);
    if (conn === undefined || !conn.open) return;
    if (jobsCancelled.has(`${a.conn}/${a.requestId}`)) return;
    const inst = insts[conn.inst]!;
    // A frozen instance's socket buffers the worker's frames until it thaws;
    // a dead or disconnected one closes the connection (closeConn) instead.
    if (inst.mode === "frozen") {
      queue.push(now + 100, a);
      return;
    }
    if (inst.mode !== "up") return;
    const c = clients.get(a.requestId);
    const stream = c?.stream ?? false;
    if (a.step < 3 && stream) {
      const text = `data: ${a.requestId}:${a.step}\n\n`;
      submit(inst, {
        kind: "chunkReceived",
        atMs: now,
        workerId: conn.id,
        requestId: a.requestId,
        chunk: conn.worker % 2 === 1 ? UTF8.encode(text) : text,
      });
    }
    if (a.step < 3) {
      queue.push(now + prng.int(5, 60), { ...a, step: a.step + 1 });
      return;
    }
    submit(inst, {
      kind: "completeReceived",
      atMs: now,
      workerId: conn.id,
      requestId: a.requestId,
      statusCode: 200,
      headers: {},
      body: stream ? "" : `body-${a.requestId}`,
      tokenCounts: null,
    });
  }

  function arrive(n: number): void {
    const candidates = up();
    if (candidates.length === 0) return;
    const inst = prng.pick(candidates);
    const id = `r${n}`;
    trace?.(`${now} ${id} arrives at ${inst.id}`);
    const c: Client = {
      id,
      inst: inst.idx,
      tenant: prng.chance(1, 3) ? "rl" : prng.pick(["a", "b"]),
      stream: prng.chance(1, 2),
      arrivedAtMs: now,
      endedAtMs: null,
      connected: true,
      started: false,
      received: "",
      ends: 0,
      status: null,
      error: false,
    };
    clients.set(id, c);
    inst.clients.add(id);
    if (prng.chance(1, 8)) {
      queue.push(now + prng.int(10, 400), { k: "abort", requestId: id });
    }
    submit(inst, {
      kind: "requestReceived",
      atMs: now,
      requestId: id,
      api: "openai",
      endpointPath: "/v1/chat/completions",
      model: "m",
      isStreaming: c.stream,
      body: `{"model":"m","n":${n}}`,
      headers: {},
      tenant: c.tenant,
    });
  }

  /** The client stops waiting: answered, aborted, or its instance died. */
  function gone(c: Client): void {
    c.connected = false;
    c.endedAtMs = now;
  }

  function endClient(id: string, status: number, error: boolean): void {
    const c = clients.get(id);
    if (c === undefined || !c.connected) return;
    c.ends++;
    trace?.(`${now} ${id} ends ${status}${error ? " (error)" : ""}`);
    if (c.ends > 1) violate("endsOnce", `${id} ended ${c.ends} times`);
    c.status = status;
    c.error = error;
    gone(c);
    insts[c.inst]?.clients.delete(id);
    stats.ended++;
  }

  function fault(f: ClusterFault): void {
    const live = up();
    trace?.(`${now} fault ${f}`);
    switch (f) {
      case "crash": {
        if (live.length < 2) return;
        const v = prng.pick(live);
        v.mode = "crashed";
        // Its sockets die with it: workers reconnect elsewhere, clients are gone.
        for (const id of [...v.conns]) closeConn(conns.get(id)!, true);
        for (const r of v.clients) gone(clients.get(r)!);
        v.clients.clear();
        return;
      }
      case "stall": {
        if (live.length < 2) return;
        const v = prng.pick(live);
        v.mode = "frozen";
        queue.push(now + prng.int(5_000, 8_000), { k: "thaw", i: v.idx });
        return;
      }
      case "logStall":
        // The log stalls (a slow fork, a failover pause): appends wait, nothing is lost.
        log.stalledUntil = now + prng.int(2_500, 4_000);
        return;
      case "blip": {
        // One instance's connection to the engine breaks for a moment; the log
        // and the other instances carry on.
        if (live.length < 2) return;
        lose(prng.pick(live), now + prng.int(300, 2_000));
        return;
      }
      case "reset": {
        // The engine restarts empty: every connection breaks, the log is new.
        log.epoch++;
        log.entries = [];
        log.waiting = [];
        const back = now + prng.int(500, 2_000);
        log.stalledUntil = back;
        for (const x of insts) lose(x, back);
        return;
      }
      case "duplicate":
        return; // acts on appends (flush)
    }
  }

  function logAppend(data: string): void {
    const last = log.entries[log.entries.length - 1]?.atMs ?? 0;
    log.entries.push({ data, atMs: Math.max(now, last) });
    stats.entries++;
  }

  // ---- the run -----------------------------------------------------------------
  for (const x of insts) {
    queue.push(now + x.idx, { k: "tick", i: x.idx });
    schedulePoll(x);
  }
  for (let w = 0; w < s.workers; w++) {
    queue.push(now + 50 + w, { k: "connect", w });
  }
  for (let n = 0; n < s.requests; n++) {
    queue.push(now + 500 + prng.int(0, ARRIVALS_UNTIL_MS), { k: "arrive", n });
  }
  for (const f of s.faults) {
    if (f === "duplicate") continue;
    queue.push(now + prng.int(FAULTS_FROM_MS, FAULTS_UNTIL_MS), {
      k: "fault",
      fault: f,
    });
  }

  for (;;) {
    const next = queue.pop();
    if (next === null || next.atMs > END_MS) break;
    now = next.atMs;
    const a = next.item;
    switch (a.k) {
      case "tick": {
        const inst = insts[a.i]!;
        if (inst.mode === "crashed" || inst.mode === "down") break;
        if (inst.mode === "up") {
          submit(inst, { kind: "tick", atMs: now, unixMs: now });
        }
        queue.push(now + TICK_MS, a);
        break;
      }
      case "poll": {
        const inst = insts[a.i]!;
        if (inst.mode === "crashed" || inst.mode === "down") break;
        poll(inst);
        schedulePoll(inst);
        break;
      }
      case "flush":
        flush(insts[a.i]!);
        break;
      case "append": {
        if (a.epoch !== log.epoch) break; // sent to the engine that was wiped
        if (now < log.stalledUntil || log.waiting.length > 0) {
          log.waiting.push(a.data);
          if (!log.drainQueued) {
            log.drainQueued = true;
            queue.push(log.stalledUntil, { k: "drain" });
          }
          break;
        }
        logAppend(a.data);
        break;
      }
      case "drain": {
        log.drainQueued = false;
        if (now < log.stalledUntil) {
          log.drainQueued = true;
          queue.push(log.stalledUntil, { k: "drain" });
          break;
        }
        for (const data of log.waiting.splice(0)) logAppend(data);
        break;
      }
      case "connect":
        connect(a.w);
        break;
      case "job":
        job(a);
        break;
      case "arrive":
        arrive(a.n);
        break;
      case "abort": {
        const c = clients.get(a.requestId);
        const inst = c === undefined ? undefined : insts[c.inst];
        if (c === undefined || !c.connected || inst === undefined) break;
        gone(c);
        inst.clients.delete(c.id);
        submit(inst, {
          kind: "clientDisconnected",
          atMs: now,
          requestId: c.id,
        });
        break;
      }
      case "fault":
        fault(a.fault);
        break;
      case "thaw": {
        const inst = insts[a.i]!;
        if (inst.mode !== "frozen") break;
        inst.mode = "up";
        // It reads before its tick chain resumes: it learns of its own death first.
        poll(inst);
        break;
      }
      case "rejoin":
        rejoin(insts[a.i]!);
        break;
    }
  }

  // ---- end-of-run invariants ---------------------------------------------------
  for (const c of clients.values()) {
    const waited = (c.endedAtMs ?? END_MS) - c.arrivedAtMs;
    if (waited > END_WITHIN_MS) {
      violate(
        "noHangOnInstanceDeath",
        `${c.id} (on instance ${c.inst}) waited ${waited} ms`,
      );
    }
    if (c.ends === 1 && !c.error && c.status === 200) {
      const want = c.stream
        ? `data: ${c.id}:0\n\ndata: ${c.id}:1\n\ndata: ${c.id}:2\n\n`
        : `body-${c.id}`;
      if (c.received !== want) {
        violate("streamExact", `${c.id} got ${JSON.stringify(c.received)}`);
      }
    }
  }
  for (const [epoch, set] of dispatchedRl) {
    if (s.rateLimited && set.size > RATE_LIMIT) {
      violate(
        "fleetRateLimit",
        `${set.size} requests of tenant rl admitted in log epoch ${epoch}, limit ${RATE_LIMIT}/min`,
      );
    }
  }
  return { violations, stats };
}
