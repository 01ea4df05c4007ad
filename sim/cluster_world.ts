// The cluster simulator (issues 16, 23): N virtual relay instances share one
// virtual log (cluster_log.ts). Each instance is the core's own life cycle,
// core/cluster/instance.ts, fed what its virtual engine, sockets and timers
// report, exactly as shell/server/cluster/instance_io.ts feeds it; effects are
// carried out by the instance that holds their socket (core/cluster/ownership.ts).
// Virtual workers and clients attach to instances; seeded faults crash, freeze
// or stop instances, duplicate appends, stall the log, break one instance's
// connection, wipe the log, or fail it over to a replica that lost its tail.
// Fleet-wide invariants are checked as the run goes (cluster_checks.ts).
import {
  DEFAULT_INSTANCE_RULES,
  initialInstance,
  type InstanceAction,
  type InstanceInput,
  type InstanceState,
  type LogEntry,
  route,
  stepInstance,
} from "../core/cluster/instance.ts";
import { ownerOf } from "../core/cluster/ownership.ts";
import type { TokenCounts } from "../core/protocol/messages.ts";
import {
  type ClusterRecord,
  decodeRecord,
  encodeRecord,
  initialClusterState,
  stateDigest,
} from "../core/cluster/mod.ts";
import {
  appending,
  eventsRecord,
  recording,
} from "../core/cluster/instance.ts";
import {
  chunkAsText,
  type Config,
  type Effect,
  type Event,
  EXTENSION_CHUNK_BYTES,
  makeConfig,
  piecesAsText,
} from "../core/mod.ts";
import {
  appendEntry,
  epochName,
  loseTail,
  newLog,
  putSnapshot,
  readAfter,
  trimBefore,
  type VirtualLog,
  wipe,
} from "./cluster_log.ts";
import {
  type ClusterInvariant,
  END_MS,
  endOfRun,
  RATE_LIMIT,
  violate,
} from "./cluster_checks.ts";
import {
  fleetTokenLimitBroken,
  newTokenLedger,
  TOKEN_LIMIT,
  TOKEN_TENANT,
  tokenCharged,
  tokenDispatched,
  tokenEntryRead,
  type TokenLedger,
  tokensOfRequest,
} from "./cluster_tokens.ts";
import { EventQueue } from "./event_queue.ts";
import { Prng } from "./prng.ts";

export type ClusterFault =
  | "crash"
  | "stall"
  | "duplicate"
  | "logStall"
  | "blip"
  | "reset"
  | "leave"
  | "failover";
export const CLUSTER_FAULTS: readonly ClusterFault[] = [
  "crash",
  "stall",
  "duplicate",
  "logStall",
  "blip",
  "reset",
  "leave",
  "failover",
];

/** Deliberately broken cluster runtimes: the invariants must catch each one. */
export type ClusterMutant =
  | "noDedup"
  | "noLiveness"
  | "everyoneExecutes"
  | "applyTimeClock"
  /** A joiner ignores the snapshot and replays what the trimmed log still has. */
  | "ignoreSnapshot"
  /** An instance cut off from its log drops a worker's handshake unanswered (issue 23 defect 1). */
  | "handshakeLeaks"
  /** A stopping instance quits at once, ending its clients' requests. */
  | "leaveAtOnce"
  /** Issue 26: each replica charges only the tokens of requests whose client it holds. */
  | "tokensPerInstance";
export const CLUSTER_MUTANTS: readonly ClusterMutant[] = [
  "noDedup",
  "noLiveness",
  "everyoneExecutes",
  "applyTimeClock",
  "ignoreSnapshot",
  "handshakeLeaks",
  "leaveAtOnce",
  "tokensPerInstance",
];

export type ClusterScenario = {
  seed: bigint;
  instances: number;
  workers: number;
  requests: number;
  faults: ClusterFault[];
  /** Tenant "rl" is limited to RATE_LIMIT admissions per minute. */
  rateLimited: boolean;
  /** Tenant TOKEN_TENANT is limited to TOKEN_LIMIT tokens per minute (issue 26). */
  tokenLimited: boolean;
};

export type { ClusterInvariant };

export type ClusterRun = {
  /** FNV-1a over every log entry appended in the run (ids and data). */
  hash: string;
  violations: { invariant: ClusterInvariant; detail: string }[];
  stats: {
    entries: number;
    deaths: number;
    rejoins: number;
    ended: number;
    digestChecks: number;
    snapshots: number;
    leaves: number;
    /** Log histories in which the token-limited tenant reached its limit (issue 26). */
    tokenLimitReached: number;
  };
};

const TICK_MS = 250;
const ARRIVALS_UNTIL_MS = 20_000;
const FAULTS_FROM_MS = 2_000;
const FAULTS_UNTIL_MS = 18_000;
const DIGEST_EVERY = 16;
const START_MS = 1_000;
/** A frozen instance's Redis commands time out after this (redis_engine.ts). */
const COMMAND_TIMEOUT_MS = 3_000;

type Inst = {
  idx: number;
  s: InstanceState;
  host: "running" | "crashed" | "frozen" | "exited";
  frozenAtMs: number;
  /** Restarts after a leave: each is a new process with a new id base. */
  restarts: number;
  outbox: Event[];
  flushQueued: boolean;
  /** Records not acknowledged by the engine, in order: sent again on resume. */
  unacked: ClusterRecord[];
  /** One connection's appends land in the order they were sent (Redis, TCP). */
  lastAppendAtMs: number;
  /** Bumped when reading stops: a poll of an older generation does nothing. */
  generation: number;
  /** This instance's connection to the engine is broken until then (blip). */
  cutUntil: number;
  /** Its engine connection broke while it was frozen: it learns on thaw. */
  broken: boolean;
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

type Conn = {
  id: string;
  worker: number;
  inst: number;
  open: boolean;
  draining: boolean;
  jobs: Set<string>;
};

/** A graceful leave being watched: its clients must not be cut short. */
type Leave = {
  inst: number;
  startMs: number;
  clients: Set<string>;
  /** Another fault struck meanwhile: the leave is not judged. */
  disturbed: boolean;
  done: boolean;
};

const UTF8 = new TextEncoder();

type Action =
  | { k: "tick"; i: number }
  | { k: "poll"; i: number; gen: number }
  | { k: "flush"; i: number }
  | {
    k: "append";
    data: string;
    epoch: number;
    i: number;
    /** The engine's acknowledgement: the sender stops keeping the record. */
    ack: () => void;
  }
  | { k: "resume"; i: number }
  | { k: "drain" }
  | { k: "connect"; w: number }
  | { k: "job"; conn: string; requestId: string; step: number }
  | { k: "arrive"; n: number }
  | { k: "abort"; requestId: string }
  | { k: "fault"; fault: ClusterFault }
  | { k: "thaw"; i: number }
  | { k: "input"; i: number; input: InstanceInput; gen: number | null }
  | { k: "join"; i: number }
  | { k: "catchUp"; i: number; gen: number }
  | {
    k: "snapshot";
    i: number;
    epoch: number;
    a: Extract<InstanceAction, { kind: "putSnapshot" }>;
  }
  | { k: "restart"; i: number };

type World = {
  s: ClusterScenario;
  mutant: ClusterMutant | null;
  trace: ((line: string) => void) | null;
  prng: Prng;
  config: Config;
  queue: EventQueue<Action>;
  now: number;
  log: VirtualLog;
  insts: Inst[];
  conns: Map<string, Conn>;
  clients: Map<string, Client>;
  connSeq: number;
  violations: ClusterRun["violations"];
  stats: ClusterRun["stats"];
  digests: Map<string, string>;
  executed: Map<string, number>;
  jobsCancelled: Set<string>;
  /**
   * Requests of tenant "rl" that reached a worker, per log history: a wiped
   * log forgets its rate windows, and so does a failover that lost the log's
   * tail (the admissions it lost are forgotten with it).
   */
  dispatchedRl: Map<number, Set<string>>;
  /** The fleet's token admissions and charges, as the log orders them (issue 26). */
  tokens: TokenLedger;
  /** The entry being applied is its first read: its charges count (cluster_tokens.ts). */
  tokenFirstRead: boolean;
  history: number;
  dead: Set<string>;
  leaves: Leave[];
  /** The entry whose effects are being carried out (effect keys). */
  applying: LogEntry | null;
  lastFaultMs: number;
  /** Acknowledgements of the appends waiting in a stalled log, in order. */
  acks: (() => void)[];
};

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
    tokenLimited: p.chance(1, 2),
  };
}

// ---- the instance: the core's life cycle, fed like the shell feeds it ---------

function newInst(w: World, idx: number, restarts: number): Inst {
  const liveness = w.mutant === "noLiveness"
    ? { deadAfterMs: 1e12, lagMaxMs: 1e12, logGapMs: 2_000 }
    : undefined;
  const base = restarts === 0 ? `i${idx}` : `i${idx}r${restarts}`;
  return {
    idx,
    s: initialInstance(
      w.config,
      initialClusterState(w.config, liveness),
      base,
      DEFAULT_INSTANCE_RULES,
    ),
    host: "running",
    frozenAtMs: 0,
    restarts,
    outbox: [],
    flushQueued: false,
    unacked: [],
    lastAppendAtMs: 0,
    generation: 0,
    cutUntil: 0,
    broken: false,
    conns: new Set(),
    clients: new Set(),
  };
}

function feed(w: World, inst: Inst, input: InstanceInput): void {
  if (inst.host !== "running") return;
  let actions: InstanceAction[];
  try {
    actions = stepInstance(inst.s, input);
  } catch (e) {
    violate(w, "coreAccepts", `${inst.s.id} on ${input.kind}: ${e}`);
    return;
  }
  for (const a of actions) carryOut(w, inst, a);
}

/** Whether the engine answers this instance now. */
function reachable(w: World, inst: Inst): boolean {
  return w.now >= inst.cutUntil && w.now >= w.log.stalledUntil;
}

function carryOut(w: World, inst: Inst, a: InstanceAction): void {
  switch (a.kind) {
    case "effects":
      return a.effects.forEach((effect, n) => execute(w, inst, effect, n));
    case "note":
    case "log":
      return;
    case "append":
      if (a.record.kind !== "events") flush(w, inst);
      return appendLater(w, inst, a.record);
    case "resume":
      w.queue.push(w.now + w.prng.int(1, 10), { k: "resume", i: inst.idx });
      return;
    case "refuseUnadmitted":
      return refuseUnadmitted(w, inst);
    case "resend":
      for (const record of [...inst.unacked]) {
        record.appliedMs = inst.s.appliedMs;
        send(w, inst, record);
      }
      return flush(w, inst);
    case "putSnapshot":
      w.queue.push(w.now + w.prng.int(1, 20), {
        k: "snapshot",
        i: inst.idx,
        epoch: w.log.epoch,
        a,
      });
      return;
    case "endLocal":
      return dropLocal(w, inst, a.error.status);
    case "observe":
      return a.events.forEach((e) => submit(w, inst, e));
    case "join":
      w.queue.push(w.now + w.prng.int(1, 10), { k: "join", i: inst.idx });
      return;
    case "read":
      w.queue.push(w.now + w.prng.int(1, 10), {
        k: "catchUp",
        i: inst.idx,
        gen: ++inst.generation,
      });
      return;
    case "stopReading":
      inst.generation++;
      return;
    case "armRetry":
      w.queue.push(w.now + a.ms, {
        k: "input",
        i: inst.idx,
        input: { kind: "retryDue" },
        gen: null,
      });
      return;
    case "rejoined":
      w.stats.rejoins++;
      return;
    case "left":
      return instanceLeft(w, inst);
  }
}

/** The shell's `submit`: routed by the core's phase, batched per turn. */
function submit(w: World, inst: Inst, e: Event): void {
  if (inst.host !== "running") return;
  const r = route(inst.s, e);
  if (r.kind === "drop") return;
  if (r.kind === "refuse") return refused(w, inst, r.effect);
  inst.outbox.push(e);
  if (!inst.flushQueued) {
    inst.flushQueued = true;
    w.queue.push(w.now, { k: "flush", i: inst.idx });
  }
}

/** An answer given here and now, without the log. */
function refused(w: World, inst: Inst, effect: Effect): void {
  if (effect.kind === "respondError") {
    return endClient(w, effect.requestId, effect.error.status, true);
  }
  if (effect.kind !== "rejectWorker") return;
  const conn = w.conns.get(effect.workerId);
  if (conn === undefined || !inst.conns.has(conn.id)) return;
  // The defect of issue 23: the instance forgets the handshake unanswered,
  // and the worker waits on it for good.
  if (w.mutant === "handshakeLeaks") inst.conns.delete(conn.id);
  else closeConn(w, conn, true);
}

function flush(w: World, inst: Inst): void {
  inst.flushQueued = false;
  if (inst.outbox.length === 0 || !recording(inst.s)) return;
  const events = inst.outbox;
  inst.outbox = [];
  appendLater(w, inst, eventsRecord(inst.s, events));
}

/** Kept until the engine acknowledges it; sent now unless the log is held. */
function appendLater(w: World, inst: Inst, record: ClusterRecord): void {
  inst.unacked.push(record);
  if (appending(inst.s)) send(w, inst, record);
}

function send(w: World, inst: Inst, record: ClusterRecord): void {
  const data = encodeRecord(record);
  const at = Math.max(inst.lastAppendAtMs, w.now + w.prng.int(0, 3));
  inst.lastAppendAtMs = at;
  const epoch = w.log.epoch;
  const ack = () => {
    const n = inst.unacked.indexOf(record);
    if (n >= 0) inst.unacked.splice(n, 1);
  };
  w.queue.push(at, { k: "append", data, epoch, i: inst.idx, ack });
  if (w.s.faults.includes("duplicate") && w.prng.chance(1, 15)) {
    // A client retry after a lost reply: the same record lands twice.
    w.queue.push(at + w.prng.int(1, 20), {
      k: "append",
      data,
      epoch,
      i: inst.idx,
      ack,
    });
  }
}

/**
 * While holding: requests not yet admitted are answered 503 and withdrawn in
 * the log (instance_io.ts).
 */
function refuseUnadmitted(w: World, inst: Inst): void {
  for (const id of [...inst.clients]) {
    if (inst.s.cluster.core.requests.has(id)) continue;
    endClient(w, id, 503, true);
    submit(w, inst, { kind: "clientDisconnected", atMs: w.now, requestId: id });
  }
}

/** One entry read by one replica: the core applies it; the run checks digests. */
function readEntry(w: World, inst: Inst, entry: LogEntry): void {
  if (w.mutant === "noDedup") {
    // Forget the last applied seq: a retried append is applied twice.
    for (const view of inst.s.cluster.instances.values()) {
      view.seq = Math.max(0, view.seq - 1);
    }
  }
  // The mutant stamps events with each replica's own reading time.
  const read = w.mutant === "applyTimeClock"
    ? { ...entry, ms: w.now + inst.idx }
    : w.mutant === "tokensPerInstance"
    ? ownTokensOnly(inst, entry)
    : entry;
  // Decoded once per replica, as the shell does (instance_io.ts readEntry).
  const record = decodeRecord(read.data);
  const firstRead = tokenEntryRead(w.tokens, w.history, entry.id, record);
  w.applying = entry;
  w.tokenFirstRead = firstRead;
  feed(w, inst, { kind: "entryRead", entry: read, record });
  w.applying = null;
  w.tokenFirstRead = false;
  const [ms = 0, seq = 0] = entry.id.split("-").map(Number);
  if ((ms + seq) % DIGEST_EVERY !== 0 || inst.s.position !== entry.id) return;
  const key = `${w.log.epoch}:${entry.id}`;
  const d = stateDigest(inst.s.cluster);
  const seen = w.digests.get(key);
  w.stats.digestChecks++;
  if (seen === undefined) w.digests.set(key, d);
  else if (seen !== d) {
    violate(
      w,
      "replicasAgree",
      `replica ${inst.s.id} at ${key}: ${d} ≠ ${seen}`,
    );
  }
}

/**
 * The tokensPerInstance mutant: this replica sees the token counts of the
 * completions of its own clients' requests only, so each instance decides the
 * token limit on the share of the traffic it holds.
 */
function ownTokensOnly(inst: Inst, entry: LogEntry): LogEntry {
  const record = decodeRecord(entry.data);
  if (record.kind !== "events") return entry;
  const events = record.events.map((e) =>
    e.kind === "completeReceived" && !inst.clients.has(e.requestId)
      ? { ...e, tokenCounts: null }
      : e
  );
  return { ...entry, data: encodeRecord({ ...record, events }) };
}

/** The shell's ownership filter: only what this instance holds runs here. */
function execute(w: World, inst: Inst, effect: Effect, n: number): void {
  const owner = ownerOf(effect);
  if (effect.kind === "log" && effect.message === "cluster instance is gone") {
    w.dead.add(String(effect.fields.instance));
  }
  if (
    w.tokenFirstRead && effect.kind === "requestFinished" &&
    effect.outcome === "completed" && effect.tenant === TOKEN_TENANT
  ) {
    tokenCharged(
      w.tokens,
      w.history,
      effect.requestId,
      tokensOfId(effect.requestId),
    );
  }
  const all = w.mutant === "everyoneExecutes";
  const key = `${w.log.epoch}:${w.applying?.id}:${n}`;
  switch (owner.kind) {
    case "workerSocket":
      if (!all && !inst.conns.has(owner.workerId)) return;
      return toWorker(w, inst, effect, key);
    case "client":
      if (!all && !inst.clients.has(owner.requestId)) return;
      return toClient(w, effect, key);
    case "requestOrigin": // metrics: nothing to see here
    case "caller":
    case "every":
    case "logLine":
      return;
  }
}

function count(w: World, key: string): void {
  const n = (w.executed.get(key) ?? 0) + 1;
  w.executed.set(key, n);
  if (n > 1) violate(w, "socketEffectsOnce", `effect ${key} ran ${n} times`);
}

function toWorker(w: World, inst: Inst, effect: Effect, key: string): void {
  if (
    effect.kind !== "sendToWorker" && effect.kind !== "closeWorker" &&
    effect.kind !== "rejectWorker"
  ) return;
  const conn = w.conns.get(effect.workerId);
  if (conn === undefined || !conn.open) return;
  count(w, key);
  if (effect.kind !== "sendToWorker") return closeConn(w, conn, true);
  const m = effect.message;
  if (m.type === "request") {
    w.trace?.(`${w.now} ${inst.s.id} sends ${m.request_id} to ${conn.id}`);
    if (w.clients.get(m.request_id)?.tenant === "rl") {
      const set = w.dispatchedRl.get(w.history) ?? new Set();
      set.add(m.request_id);
      w.dispatchedRl.set(w.history, set);
    }
    if (w.clients.get(m.request_id)?.tenant === TOKEN_TENANT) {
      tokenDispatched(w.tokens, w.history, m.request_id);
    }
    conn.jobs.add(m.request_id);
    w.queue.push(w.now + w.prng.int(5, 40), {
      k: "job",
      conn: conn.id,
      requestId: m.request_id,
      step: 0,
    });
  } else if (m.type === "cancel") {
    w.jobsCancelled.add(`${conn.id}/${m.request_id}`);
    jobDone(w, conn, m.request_id);
  } else if (m.type === "ping") {
    submit(w, w.insts[conn.inst]!, {
      kind: "pongReceived",
      atMs: w.now,
      workerId: conn.id,
      currentLoad: null,
    });
  } else if (m.type === "graceful_shutdown") {
    // The worker finishes what it holds, then closes and reconnects (a relay
    // instance stopping: ON_SERVER_SHUTDOWN=reconnect).
    conn.draining = true;
    if (conn.jobs.size === 0) workerCloses(w, conn);
  }
}

function toClient(w: World, effect: Effect, key: string): void {
  if (
    effect.kind !== "startStream" && effect.kind !== "writeChunk" &&
    effect.kind !== "endStream" && effect.kind !== "respond" &&
    effect.kind !== "respondError"
  ) return;
  const c = w.clients.get(effect.requestId);
  if (c === undefined || !c.connected) return;
  count(w, key);
  if (effect.kind === "startStream") c.started = true;
  else if (effect.kind === "writeChunk") {
    c.received += chunkAsText(effect.chunk);
  } else if (effect.kind === "endStream") {
    endClient(w, c.id, 200, effect.error !== null);
  } else if (effect.kind === "respond") {
    c.received = piecesAsText(effect.bodyPieces ?? [], effect.body);
    endClient(w, c.id, effect.status, false);
  } else endClient(w, c.id, effect.error.status, true);
}

/** endLocal: every client ended, every socket (and pending handshake) closed. */
function dropLocal(w: World, inst: Inst, status: number): void {
  inst.unacked = [];
  for (const r of [...inst.clients]) endClient(w, r, status, true);
  inst.clients.clear();
  for (const id of [...inst.conns]) {
    const c = w.conns.get(id);
    if (c !== undefined) closeConn(w, c, true);
  }
}

function instanceLeft(w: World, inst: Inst): void {
  inst.host = "exited";
  w.stats.leaves++;
  for (const l of w.leaves) if (l.inst === inst.idx) l.done = true;
  w.trace?.(`${w.now} ${inst.s.id} left the cluster`);
  // A rolling restart: the same slot comes back as a new process.
  w.queue.push(w.now + w.prng.int(1_000, 3_000), { k: "restart", i: inst.idx });
}

// ---- workers and clients -------------------------------------------------------

function closeConn(w: World, conn: Conn, reconnect: boolean): void {
  if (!conn.open) return;
  conn.open = false;
  w.insts[conn.inst]?.conns.delete(conn.id);
  if (reconnect) {
    w.queue.push(w.now + w.prng.int(300, 1500), {
      k: "connect",
      w: conn.worker,
    });
  }
}

/** The worker closes its socket: its instance hears the close. */
function workerCloses(w: World, conn: Conn): void {
  const inst = w.insts[conn.inst]!;
  if (conn.open && inst.host === "running") {
    submit(w, inst, {
      kind: "workerDisconnected",
      atMs: w.now,
      workerId: conn.id,
      reason: "worker closed the connection",
    });
  }
  closeConn(w, conn, true);
}

function jobDone(w: World, conn: Conn, requestId: string): void {
  conn.jobs.delete(requestId);
  if (conn.draining && conn.jobs.size === 0 && conn.open) {
    w.queue.push(w.now + 1, {
      k: "job",
      conn: conn.id,
      requestId: "",
      step: -1,
    });
  }
}

function connect(w: World, worker: number): void {
  // The balancer sees only processes that accept connections.
  const candidates = w.insts.filter((x) => x.host === "running");
  if (candidates.length === 0) {
    w.queue.push(w.now + 500, { k: "connect", w: worker });
    return;
  }
  const inst = w.prng.pick(candidates);
  w.trace?.(`${w.now} worker ${worker} connects to ${inst.s.id}`);
  const conn: Conn = {
    id: `w${worker}c${++w.connSeq}`,
    worker,
    inst: inst.idx,
    open: true,
    draining: false,
    jobs: new Set(),
  };
  w.conns.set(conn.id, conn);
  inst.conns.add(conn.id);
  submit(w, inst, {
    kind: "workerConnectAttempted",
    atMs: w.now,
    workerId: conn.id,
    provider: "local",
    clientIp: "10.0.0.1",
    secretValid: true,
  });
  if (!conn.open) return; // refused at once
  submit(w, inst, {
    kind: "registerReceived",
    atMs: w.now,
    workerId: conn.id,
    workerName: `w${worker}`,
    models: ["m"],
    maxConcurrent: 2,
    protocolVersion: "2026-04-bridge-v1",
    currentLoad: 0,
    // Odd workers stream bytes (chunk-bytes-v1, issue 18): the log's record
    // codec carries them to every replica.
    ...(worker % 2 === 1 ? { extensions: [EXTENSION_CHUNK_BYTES] } : {}),
  });
}

function job(w: World, a: Extract<Action, { k: "job" }>): void {
  const conn = w.conns.get(a.conn);
  if (conn === undefined || !conn.open) return;
  if (a.step < 0) {
    if (conn.draining && conn.jobs.size === 0) workerCloses(w, conn);
    return;
  }
  if (w.jobsCancelled.has(`${a.conn}/${a.requestId}`)) return;
  const inst = w.insts[conn.inst]!;
  // A frozen instance's socket buffers the worker's frames until it thaws;
  // a dead or disconnected one closes the connection (closeConn) instead.
  if (inst.host === "frozen") {
    w.queue.push(w.now + 100, a);
    return;
  }
  if (inst.host !== "running") return;
  const stream = w.clients.get(a.requestId)?.stream ?? false;
  if (a.step < 3 && stream) {
    const text = `data: ${a.requestId}:${a.step}\n\n`;
    submit(w, inst, {
      kind: "chunkReceived",
      atMs: w.now,
      workerId: conn.id,
      requestId: a.requestId,
      chunk: conn.worker % 2 === 1 ? UTF8.encode(text) : text,
    });
  }
  if (a.step < 3) {
    w.queue.push(w.now + w.prng.int(5, 60), { ...a, step: a.step + 1 });
    return;
  }
  submit(w, inst, {
    kind: "completeReceived",
    atMs: w.now,
    workerId: conn.id,
    requestId: a.requestId,
    statusCode: 200,
    headers: {},
    body: stream ? "" : `body-${a.requestId}`,
    tokenCounts: tokenCountsOf(a.requestId),
  });
  jobDone(w, conn, a.requestId);
}

/** What the virtual backend used for request `r<n>` (fixed per request). */
function tokenCountsOf(requestId: string): TokenCounts {
  const t = tokensOfRequest(Number(requestId.slice(1)));
  return {
    prompt_tokens: t.prompt,
    completion_tokens: t.completion,
    total_tokens: t.prompt + t.completion,
  };
}

function tokensOfId(requestId: string): number {
  const t = tokensOfRequest(Number(requestId.slice(1)));
  return t.prompt + t.completion;
}

function arrive(w: World, n: number): void {
  const candidates = w.insts.filter((x) => x.host === "running");
  if (candidates.length === 0) return;
  const inst = w.prng.pick(candidates);
  const id = `r${n}`;
  w.trace?.(`${w.now} ${id} arrives at ${inst.s.id}`);
  const c: Client = {
    id,
    inst: inst.idx,
    tenant: w.prng.chance(1, 3) ? "rl" : w.prng.pick(["a", "b"]),
    stream: w.prng.chance(1, 2),
    arrivedAtMs: w.now,
    endedAtMs: null,
    connected: true,
    started: false,
    received: "",
    ends: 0,
    status: null,
    error: false,
  };
  w.clients.set(id, c);
  inst.clients.add(id);
  if (w.prng.chance(1, 8)) {
    w.queue.push(w.now + w.prng.int(10, 400), { k: "abort", requestId: id });
  }
  submit(w, inst, {
    kind: "requestReceived",
    atMs: w.now,
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
function gone(w: World, c: Client): void {
  c.connected = false;
  c.endedAtMs = w.now;
}

function endClient(w: World, id: string, status: number, error: boolean): void {
  const c = w.clients.get(id);
  if (c === undefined || !c.connected) return;
  c.ends++;
  w.trace?.(`${w.now} ${id} ends ${status}${error ? " (error)" : ""}`);
  if (c.ends > 1) violate(w, "endsOnce", `${id} ended ${c.ends} times`);
  c.status = status;
  c.error = error;
  gone(w, c);
  w.insts[c.inst]?.clients.delete(id);
  w.stats.ended++;
}

function abort(w: World, requestId: string): void {
  const c = w.clients.get(requestId);
  const inst = c === undefined ? undefined : w.insts[c.inst];
  if (c === undefined || !c.connected || inst === undefined) return;
  gone(w, c);
  inst.clients.delete(c.id);
  submit(w, inst, { kind: "clientDisconnected", atMs: w.now, requestId: c.id });
}

// ---- faults -------------------------------------------------------------------

function serving(w: World): Inst[] {
  return w.insts.filter((x) => x.host === "running" && x.s.phase === "serving");
}

function fault(w: World, f: ClusterFault): void {
  const live = serving(w);
  w.trace?.(`${w.now} fault ${f}`);
  w.lastFaultMs = w.now;
  for (const l of w.leaves) if (!l.done) l.disturbed ||= f !== "duplicate";
  switch (f) {
    case "crash": {
      if (live.length < 2) return;
      const v = w.prng.pick(live);
      v.host = "crashed";
      // Its sockets die with it: workers reconnect elsewhere, clients are gone.
      for (const id of [...v.conns]) closeConn(w, w.conns.get(id)!, true);
      for (const r of v.clients) gone(w, w.clients.get(r)!);
      v.clients.clear();
      return;
    }
    case "stall": {
      if (live.length < 2) return;
      const v = w.prng.pick(live);
      v.host = "frozen";
      v.frozenAtMs = w.now;
      w.queue.push(w.now + w.prng.int(1_500, 8_000), { k: "thaw", i: v.idx });
      return;
    }
    case "logStall":
      // The log stalls (a slow fork): appends wait, nothing is lost.
      w.log.stalledUntil = w.now + w.prng.int(2_500, 4_000);
      return;
    case "blip": {
      // One instance's connection to the engine breaks for a moment; the log
      // and the other instances carry on.
      if (live.length < 2) return;
      const v = w.prng.pick(live);
      v.cutUntil = w.now + w.prng.int(300, 2_000);
      feed(w, v, {
        kind: "logLost",
        reason: "engine connection closed",
        reset: false,
        atMs: w.now,
      });
      return;
    }
    case "reset":
      // The engine restarts empty: every connection breaks, the log is new.
      wipe(w.log);
      w.history++;
      return everyoneLoses(w, w.now + w.prng.int(500, 2_000));
    case "failover":
      // The master dies; a replica that missed the last entries takes over.
      loseTail(w.log, w.prng.int(1, 6));
      w.history++;
      return everyoneLoses(w, w.now + w.prng.int(300, 1_500));
    case "leave":
      return leave(w, live);
    case "duplicate":
      return; // acts on appends (appendLater)
  }
}

function everyoneLoses(w: World, backAtMs: number): void {
  w.log.stalledUntil = backAtMs;
  w.log.waiting = [];
  for (const x of w.insts) {
    if (x.host === "frozen") x.broken = true;
    // The engine tells: the log is not the one applied (new epoch, lost tail).
    feed(w, x, {
      kind: "logLost",
      reason: "log reset",
      reset: true,
      atMs: w.now,
    });
  }
}

/** SIGTERM of one instance: it drains its own sockets, then leaves. */
function leave(w: World, live: Inst[]): void {
  if (live.length < 2) return;
  const busy = live.filter((x) => x.clients.size > 0);
  if (busy.length === 0 && w.now < FAULTS_UNTIL_MS + 10_000) {
    // Leave with requests in flight: that is what a leave must get right.
    w.queue.push(w.now + 97, { k: "fault", fault: "leave" });
    return;
  }
  const v = w.prng.pick(busy.length > 0 ? busy : live);
  w.leaves.push({
    inst: v.idx,
    startMs: w.now,
    clients: new Set(v.clients),
    disturbed: false,
    done: false,
  });
  if (w.mutant === "leaveAtOnce") {
    feed(w, v, { kind: "closeRequested" });
    dropLocal(w, v, 503);
    return instanceLeft(w, v);
  }
  feed(w, v, { kind: "leaveRequested" });
}

// ---- the run --------------------------------------------------------------------

function newWorld(
  s: ClusterScenario,
  mutant: ClusterMutant | null,
  trace: ((line: string) => void) | null,
): World {
  const config = makeConfig({
    defaultRateLimit: null,
    rateLimits: s.rateLimited
      ? { rl: { limit: RATE_LIMIT, windowMs: 60_000 } }
      : {},
    tokenRateLimits: s.tokenLimited
      ? { [TOKEN_TENANT]: { tokens: TOKEN_LIMIT, windowMs: 60_000 } }
      : {},
  });
  const w: World = {
    s,
    mutant,
    trace,
    prng: Prng.fromSeed(s.seed ^ 0x5eedn),
    config,
    queue: new EventQueue<Action>(),
    now: START_MS,
    log: newLog(),
    insts: [],
    conns: new Map(),
    clients: new Map(),
    connSeq: 0,
    violations: [],
    stats: {
      entries: 0,
      deaths: 0,
      rejoins: 0,
      ended: 0,
      digestChecks: 0,
      snapshots: 0,
      leaves: 0,
      tokenLimitReached: 0,
    },
    digests: new Map(),
    executed: new Map(),
    jobsCancelled: new Set(),
    dispatchedRl: new Map(),
    tokens: newTokenLedger(),
    tokenFirstRead: false,
    history: 0,
    dead: new Set(),
    leaves: [],
    applying: null,
    lastFaultMs: 0,
    acks: [],
  };
  for (let i = 0; i < s.instances; i++) w.insts.push(newInst(w, i, 0));
  return w;
}

function schedule(w: World): void {
  const { s, queue, prng } = w;
  for (const x of w.insts) startInstance(w, x);
  for (let n = 0; n < s.workers; n++) {
    queue.push(w.now + 50 + n, { k: "connect", w: n });
  }
  for (let n = 0; n < s.requests; n++) {
    queue.push(w.now + 500 + prng.int(0, ARRIVALS_UNTIL_MS), {
      k: "arrive",
      n,
    });
  }
  for (const f of s.faults) {
    if (f === "duplicate") continue;
    queue.push(w.now + prng.int(FAULTS_FROM_MS, FAULTS_UNTIL_MS), {
      k: "fault",
      fault: f,
    });
  }
}

/** A process starts: its first join, then its tick chain. */
function startInstance(w: World, x: Inst): void {
  w.queue.push(w.now + x.idx, { k: "join", i: x.idx });
  w.queue.push(w.now + TICK_MS + x.idx, { k: "tick", i: x.idx });
}

function step(w: World, a: Action): void {
  switch (a.k) {
    case "tick":
      return tick(w, a.i);
    case "poll":
      return poll(w, a.i, a.gen);
    case "flush":
      return flush(w, w.insts[a.i]!);
    case "append":
      return append(w, a);
    case "drain":
      return drainWaiting(w);
    case "connect":
      return connect(w, a.w);
    case "job":
      return job(w, a);
    case "arrive":
      return arrive(w, a.n);
    case "abort":
      return abort(w, a.requestId);
    case "fault":
      return fault(w, a.fault);
    case "thaw":
      return thaw(w, w.insts[a.i]!);
    case "input": {
      const inst = w.insts[a.i]!;
      if (a.gen === null || a.gen === inst.generation) feed(w, inst, a.input);
      return;
    }
    case "join":
      return join(w, w.insts[a.i]!);
    case "resume":
      return resume(w, w.insts[a.i]!);
    case "catchUp":
      return catchUp(w, w.insts[a.i]!, a.gen);
    case "snapshot":
      return storeSnapshot(w, a);
    case "restart": {
      const old = w.insts[a.i]!;
      const next = newInst(w, a.i, old.restarts + 1);
      w.insts[a.i] = next;
      return startInstance(w, next);
    }
  }
}

function tick(w: World, i: number): void {
  const inst = w.insts[i]!;
  if (inst.host === "crashed" || inst.host === "exited") return;
  if (inst.host === "running") {
    submit(w, inst, { kind: "tick", atMs: w.now, unixMs: w.now });
  }
  w.queue.push(w.now + TICK_MS, { k: "tick", i });
}

function join(w: World, inst: Inst): void {
  if (inst.host !== "running" || inst.s.phase !== "joining") return;
  if (!reachable(w, inst)) {
    return feed(w, inst, {
      kind: "joinFailed",
      error: "engine unreachable",
      refused: false,
    });
  }
  feed(w, inst, {
    kind: "joinRead",
    epoch: epochName(w.log),
    snapshot: w.mutant === "ignoreSnapshot" ? null : w.log.snapshot,
  });
}

function resume(w: World, inst: Inst): void {
  if (inst.host !== "running" || inst.s.phase !== "holding") return;
  if (!reachable(w, inst)) {
    return feed(w, inst, {
      kind: "resumeFailed",
      error: "engine unreachable",
      atMs: w.now,
    });
  }
  const last = inst.s.position;
  feed(w, inst, {
    kind: "resumeRead",
    epoch: epochName(w.log),
    lastEntryKept: last === "0"
      ? null
      : w.log.entries.some((e) => e.id === last),
    atMs: w.now,
  });
}

function catchUp(w: World, inst: Inst, gen: number): void {
  if (inst.host !== "running" || gen !== inst.generation) return;
  if (!reachable(w, inst)) {
    return feed(w, inst, {
      kind: "readFailed",
      error: "engine unreachable",
      atMs: w.now,
    });
  }
  for (const entry of readAfter(w.log, inst.s.position, 1e9)) {
    if (gen !== inst.generation) return;
    readEntry(w, inst, entry);
  }
  feed(w, inst, { kind: "caughtUp" });
  schedulePoll(w, inst);
}

function schedulePoll(w: World, inst: Inst): void {
  w.queue.push(w.now + w.prng.int(1, 15), {
    k: "poll",
    i: inst.idx,
    gen: inst.generation,
  });
}

function poll(w: World, i: number, gen: number): void {
  const inst = w.insts[i]!;
  if (inst.host === "crashed" || inst.host === "exited") return;
  if (gen !== inst.generation) return;
  if (inst.host === "running" && reachable(w, inst)) {
    if (inst.s.epoch !== epochName(w.log)) {
      // Wiped while it was frozen: its commands fail now.
      return feed(w, inst, {
        kind: "logLost",
        reason: "log reset",
        reset: true,
        atMs: w.now,
      });
    }
    for (const entry of readAfter(w.log, inst.s.position, 1_000)) {
      if (gen !== inst.generation || inst.host !== "running") return;
      readEntry(w, inst, entry);
    }
  }
  if (gen === inst.generation) schedulePoll(w, inst);
}

function thaw(w: World, inst: Inst): void {
  if (inst.host !== "frozen") return;
  inst.host = "running";
  // Its Redis commands timed out while it was stopped (redis_engine.ts): the
  // shell reports the log lost before it reads anything.
  if (inst.broken || w.now - inst.frozenAtMs > COMMAND_TIMEOUT_MS) {
    // A log reset or failover meanwhile: the engine says so (reset).
    const reset = inst.broken;
    inst.broken = false;
    return feed(w, inst, {
      kind: "logLost",
      reason: "commands timed out",
      reset,
      atMs: w.now,
    });
  }
  poll(w, inst.idx, inst.generation);
}

function append(w: World, a: Extract<Action, { k: "append" }>): void {
  if (a.epoch !== w.log.epoch) return; // sent to the engine that was wiped
  const inst = w.insts[a.i];
  if (inst !== undefined && w.now < inst.cutUntil) return; // its connection broke
  if (w.now < w.log.stalledUntil || w.log.waiting.length > 0) {
    w.log.waiting.push(a.data);
    w.acks.push(a.ack);
    if (!w.log.drainQueued) {
      w.log.drainQueued = true;
      w.queue.push(w.log.stalledUntil, { k: "drain" });
    }
    return;
  }
  appendEntry(w.log, a.data, w.now);
  w.stats.entries++;
  a.ack();
}

function drainWaiting(w: World): void {
  w.log.drainQueued = false;
  if (w.now < w.log.stalledUntil) {
    w.log.drainQueued = true;
    w.queue.push(w.log.stalledUntil, { k: "drain" });
    return;
  }
  for (const data of w.log.waiting.splice(0)) {
    appendEntry(w.log, data, w.now);
    w.stats.entries++;
  }
  for (const ack of w.acks.splice(0)) ack();
}

function storeSnapshot(w: World, a: Extract<Action, { k: "snapshot" }>): void {
  const inst = w.insts[a.i]!;
  if (a.epoch !== w.log.epoch || !reachable(w, inst)) return;
  putSnapshot(w.log, a.a.snapshot);
  if (a.a.trimBeforeId !== null) trimBefore(w.log, a.a.trimBeforeId);
  w.stats.snapshots++;
  feed(w, inst, {
    kind: "snapshotStored",
    id: a.a.snapshot.id,
    digest: a.a.digest,
  });
}

export function runCluster(
  s: ClusterScenario,
  mutant: ClusterMutant | null = null,
  /** Receives one line per notable step (the CLI's --one --trace). */
  trace: ((line: string) => void) | null = null,
): ClusterRun {
  const w = newWorld(s, mutant, trace);
  schedule(w);
  for (;;) {
    const next = w.queue.pop();
    if (next === null || next.atMs > END_MS) break;
    w.now = next.atMs;
    step(w, next.item);
  }
  endOfRun(w);
  if (s.tokenLimited) {
    // Past violate's cap of 20: one line per log history at most, and it must
    // not be crowded out by the replicasAgree lines a diverging replica floods.
    for (const detail of fleetTokenLimitBroken(w.tokens, tokensOfId)) {
      w.violations.push({ invariant: "fleetTokenLimit", detail });
    }
  }
  w.stats.tokenLimitReached = [...w.tokens.histories.values()]
    .filter((x) => x.inFlightAtReach !== null).length;
  w.stats.deaths = w.dead.size;
  return {
    hash: (w.log.hash >>> 0).toString(16).padStart(8, "0"),
    violations: w.violations,
    stats: w.stats,
  };
}
