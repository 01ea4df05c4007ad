// The cluster simulator (issues 16, 23, 34): N virtual relay instances share one
// virtual log (log.ts) and talk over virtual peer links. Each instance is the
// core's own host, core/cluster/host.ts (the life cycle, the outbox, the
// ownership filter and the direct data path), run over ports this file
// implements, as shell/server/cluster/instance_io.ts implements them over
// Redis and WebSockets. Virtual workers and clients attach to instances;
// streams go direct between instances; seeded faults crash, freeze or stop
// instances, duplicate appends, stall the log, break one instance's
// connection, wipe the log, or fail it over to a replica that lost its tail.
// Fleet-wide and data-path invariants are checked in the same runs (checks.ts).
import {
  DATA_PATH_RULES,
  type DataPathRules,
  type Host,
  type HostFact,
  type HostInput,
  makeHost,
  stepHost,
  type Unstamped,
} from "../../core/cluster/host.ts";
import {
  DEFAULT_INSTANCE_RULES,
  initialInstance,
  type InstanceRules,
  type LogEntry,
  type Snapshot,
} from "../../core/cluster/instance.ts";
import { ownerOf } from "../../core/cluster/ownership.ts";
import {
  type ClusterRecord,
  decodeRecord,
  type DirectChunk,
  encodeRecord,
  initialClusterState,
  type InstanceId,
  stateDigest,
} from "../../core/cluster/mod.ts";
import {
  chunkAsText,
  type Config,
  type Effect,
  type Event,
  EXTENSION_CHUNK_BYTES,
  makeConfig,
  piecesAsText,
} from "../../core/mod.ts";
import type { TokenCounts } from "../../core/protocol/messages.ts";
import { tokensOf } from "../../core/state/usage.ts";
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
} from "./log.ts";
import {
  type ClusterInvariant,
  END_MS,
  endOfRun,
  RATE_LIMIT,
  STREAM_CHARS_MAX,
  violate,
} from "./checks.ts";
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
} from "./tokens.ts";
import { EventQueue } from "../event_queue.ts";
import { Prng } from "../prng.ts";

export type ClusterFault =
  | "crash"
  /** The worker's instance dies just after logging a direct end, its last pieces on the link. */
  | "crashAtEnd"
  | "stall"
  | "duplicate"
  | "logStall"
  | "blip"
  | "reset"
  | "leave"
  | "failover";
export const CLUSTER_FAULTS: readonly ClusterFault[] = [
  "crash",
  "crashAtEnd",
  "stall",
  "duplicate",
  "logStall",
  "blip",
  "reset",
  "leave",
  "failover",
];

/** Deliberately broken cluster hosts: the invariants must catch each one (mutants.ts). */
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
  | "tokensPerInstance"
  /** Issue 34: the direct path never cuts an answer for size. */
  | "directSizeUncut"
  /** Issue 33: the content deltas of pieces sent direct are not logged (not counted). */
  | "directDeltasSkipped"
  /** Issue 33 item 4: a whole stream gets an error when its instance ends what it holds. */
  | "wholeStreamErrs"
  /** Issue 34: a leaving instance drops its data path (senders and receivers) at once. */
  | "leaveDropsDirect"
  /** Issue 23: no byte of a stream waits for its commit to be applied. */
  | "writeBeforeCommit"
  /** Issue 23: an end does not wait for the pieces sent before it. */
  | "endIgnoresPieces"
  /** Issue 23: pieces that come before their dispatch is applied are lost. */
  | "dropEarlyPieces"
  /** Issue 23: an end whose pieces were lost waits forever. */
  | "endWaitsForever"
  /** Issue 23: an instance whose log blinks gives up what it holds at once. */
  | "giveUpOnHold";
export const CLUSTER_MUTANTS: readonly ClusterMutant[] = [
  "noDedup",
  "noLiveness",
  "everyoneExecutes",
  "applyTimeClock",
  "ignoreSnapshot",
  "handshakeLeaks",
  "leaveAtOnce",
  "tokensPerInstance",
  "directSizeUncut",
  "directDeltasSkipped",
  "wholeStreamErrs",
  "leaveDropsDirect",
  "writeBeforeCommit",
  "endIgnoresPieces",
  "dropEarlyPieces",
  "endWaitsForever",
  "giveUpOnHold",
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
  /**
   * The last instance tails the log slowly (20-150 ms a poll): pieces reach
   * it before the dispatch they answer (issue 23's early pieces).
   */
  slowReader?: boolean;
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
    /** Answer pieces that crossed a peer link (the direct path, issue 23). */
    piecesSent: number;
    /** Streams that ended whole (200, no error). */
    streamsWhole: number;
    /** Streams cut for size (the direct path's limit). */
    sizeCuts: number;
    /** Whole streams ended by their instance outside the log (issue 33 item 4). */
    endedHere: number;
  };
};

const TICK_MS = 250;
const ARRIVALS_UNTIL_MS = 20_000;
const FAULTS_FROM_MS = 2_000;
const FAULTS_UNTIL_MS = 18_000;
const DIGEST_EVERY = 128;
const START_MS = 1_000;
/** A frozen instance's Redis commands time out after this (redis_engine.ts). */
const COMMAND_TIMEOUT_MS = 3_000;
/** Chunks of a stream; a "big" one pads each past the stream limit together. */
const CHUNKS = 3;

type Inst = {
  idx: number;
  host: Host;
  /** Where peers send it pieces: one per process (a rejoin keeps it). */
  url: string;
  proc: "running" | "crashed" | "frozen" | "exited";
  frozenAtMs: number;
  /** When a frozen process thaws: what reaches it meanwhile waits till then, in order. */
  thawAtMs: number;
  /** Restarts after a leave: each is a new process with a new id base. */
  restarts: number;
  /** One connection's appends land in the order they were sent (Redis, TCP). */
  lastAppendAtMs: number;
  /** This instance's connection to the engine is broken until then (blip). */
  cutUntil: number;
  /** Its engine connection broke while it was frozen: it learns on thaw. */
  broken: boolean;
  conns: Set<string>;
  clients: Set<string>;
};

type Client = {
  id: string;
  n: number;
  inst: number;
  tenant: string;
  stream: boolean;
  /** Its body asks for usage (`stream_options.include_usage`): the worker reports counts. */
  asksUsage: boolean;
  /** Its answer outgrows the stream limit. */
  big: boolean;
  arrivedAtMs: number;
  endedAtMs: number | null;
  connected: boolean;
  started: boolean;
  received: string;
  ends: number;
  status: number | null;
  error: boolean;
  errorCode: string | null;
};

type Conn = {
  id: string;
  worker: number;
  inst: number;
  open: boolean;
  draining: boolean;
  jobs: Set<string>;
};

/** An open peer link, as its two ends know it; its pieces land in order (one socket). */
type Link = {
  from: number;
  fromId: InstanceId;
  to: string;
  toId: InstanceId;
  lastAtMs: number;
  /** Its sender died: pieces still on it may be lost (a clean close sends them). */
  severed: boolean;
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
  | {
    k: "append";
    data: string;
    epoch: number;
    i: number;
    /** The engine's acknowledgement, to the process that sent it. */
    ack: () => void;
  }
  | { k: "drain" }
  | { k: "connect"; w: number }
  | { k: "job"; conn: string; requestId: string; step: number }
  | { k: "arrive"; n: number }
  | { k: "abort"; requestId: string }
  | { k: "fault"; fault: ClusterFault }
  | { k: "thaw"; i: number }
  | { k: "input"; i: number; inst: Inst; input: HostInput }
  | { k: "join"; inst: Inst }
  | { k: "resume"; inst: Inst }
  | { k: "catchUp"; i: number; gen: number }
  | {
    k: "snapshot";
    inst: Inst;
    epoch: number;
    snapshot: Snapshot;
    trimBeforeId: string | null;
    digest: string;
  }
  | {
    k: "piece";
    link: Link;
    piece: DirectChunk;
    /** Lost with the link when its sender dies first (seeded). */
    lostIfSenderDies: boolean;
  }
  | { k: "restart"; i: number }
  | { k: "kill"; inst: Inst };

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
  /** Per request: the whole answer of each dispatch (by connection). */
  answers: Map<string, Map<string, string>>;
  /**
   * Per request: when its client's instance learnt the answer was complete
   * (the worker's completion there, or its end marker arrived), by answer.
   */
  completedAt: Map<string, Map<string, number>>;
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
  /** The entry being applied is its first read: its charges count (tokens.ts). */
  tokenFirstRead: boolean;
  history: number;
  dead: Set<string>;
  leaves: Leave[];
  /** The entry whose effects are being carried out (effect keys), and how often each key ran in it. */
  applying: LogEntry | null;
  applyingSeen: Map<string, number>;
  lastFaultMs: number;
  /** Whether a peer link closed or an instance died or gave up what it held. */
  linksLost: boolean;
  links: Link[];
  /** Acknowledgements of the appends waiting in a stalled log, in order. */
  acks: (() => void)[];
  /** crashAtEnd is armed: the next direct end to another instance... */
  crashAtEnd: boolean;
  /** ...marks its sender, which dies once that end's record is appended. */
  dieAfterAppend: Inst | null;
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
    slowReader: p.chance(1, 3),
  };
}

// ---- the instance: the core's host, over virtual ports -------------------------

function rulesOf(mutant: ClusterMutant | null): DataPathRules {
  const real = DATA_PATH_RULES;
  switch (mutant) {
    case "directSizeUncut":
      return {
        ...real,
        routeChunk: (senders, core, owner, e) =>
          real.routeChunk(
            senders,
            {
              ...core,
              config: { ...core.config, streamCharsMax: Infinity },
            },
            owner,
            e,
          ),
      };
    case "directDeltasSkipped":
      return {
        ...real,
        routeEnd: (...a) => ({ ...real.routeEnd(...a), deltas: null }),
        linkBroke: (...a) =>
          real.linkBroke(...a).map((c) => ({ ...c, deltas: null })),
      };
    case "wholeStreamErrs":
      return { ...real, completedStream: () => null };
    case "writeBeforeCommit":
      return {
        ...real,
        pieceArrived: (rx, piece, from, nowMs) => {
          const out = real.pieceArrived(rx, piece, from, nowMs);
          const s = rx.get(piece.requestId);
          if (s !== undefined && !s.committed && s.held.length > 0) {
            for (const chunk of s.held.splice(0)) {
              out.push({ kind: "write", requestId: piece.requestId, chunk });
            }
          }
          return out;
        },
      };
    case "endIgnoresPieces":
      return { ...real, expectPieces: () => {} };
    case "dropEarlyPieces":
      return {
        ...real,
        pieceArrived: (rx, piece, from, nowMs) =>
          rx.get(piece.requestId)?.workerId === piece.workerId
            ? real.pieceArrived(rx, piece, from, nowMs)
            : [],
      };
    case "endWaitsForever":
      return {
        ...real,
        receiverDue: (rx, nowMs, idleMs) =>
          real.receiverDue(rx, nowMs, idleMs, Number.POSITIVE_INFINITY),
        peerGone: () => [],
      };
    default:
      return real;
  }
}

function newInst(w: World, idx: number, restarts: number): Inst {
  const liveness = w.mutant === "noLiveness"
    ? { deadAfterMs: 1e12, lagMaxMs: 1e12, logGapMs: 2_000 }
    : undefined;
  const base = restarts === 0 ? `i${idx}` : `i${idx}r${restarts}`;
  const rules: InstanceRules = w.mutant === "giveUpOnHold"
    ? { ...DEFAULT_INSTANCE_RULES, lostAfterMs: 0, rejoinRetryMs: 1 }
    : DEFAULT_INSTANCE_RULES;
  const s = initialInstance(
    w.config,
    initialClusterState(w.config, liveness),
    base,
    rules,
  );
  const inst = {
    idx,
    url: `sim://${base}`,
    proc: "running",
    frozenAtMs: 0,
    thawAtMs: 0,
    restarts,
    lastAppendAtMs: 0,
    cutUntil: 0,
    broken: false,
    conns: new Set(),
    clients: new Set(),
  } as unknown as Inst;
  inst.host = makeHost(s, ports(w, inst), rulesOf(w.mutant));
  inst.host.peerUrl = inst.url;
  return inst;
}

/** An input for a running process, stamped with the virtual clock. */
function feed(w: World, inst: Inst, input: Unstamped): void {
  if (inst.proc !== "running") return;
  stepHost(inst.host, { ...input, atMs: w.now } as HostInput);
}

/** An input the process takes later (`ms` from now), if it is still running then. */
function later(w: World, inst: Inst, ms: number, input: Unstamped): void {
  w.queue.push(w.now + ms, {
    k: "input",
    i: inst.idx,
    inst,
    input: { ...input, atMs: w.now + ms } as HostInput,
  });
}

/** Whether the engine answers this instance now. */
function reachable(w: World, inst: Inst): boolean {
  return w.now >= inst.cutUntil && w.now >= w.log.stalledUntil;
}

function ports(w: World, inst: Inst): Host["ports"] {
  const everyone = w.mutant === "everyoneExecutes";
  return {
    append: (record, ticket) => send(w, inst, record, ticket),
    read(gen) {
      w.queue.push(w.now + w.prng.int(1, 10), {
        k: "catchUp",
        i: inst.idx,
        gen,
      });
    },
    join() {
      w.queue.push(w.now + w.prng.int(1, 10), { k: "join", inst });
    },
    resume() {
      w.queue.push(w.now + w.prng.int(1, 10), { k: "resume", inst });
    },
    putSnapshot(snapshot, trimBeforeId, digest) {
      w.queue.push(w.now + w.prng.int(1, 20), {
        k: "snapshot",
        inst,
        epoch: w.log.epoch,
        snapshot,
        trimBeforeId,
        digest,
      });
    },
    sendPiece: (to, url, piece) => sendPiece(w, inst, to, url, piece),
    closeLinks: () => closeLinksFrom(w, inst),
    holds: {
      client: (id) => everyone || inst.clients.has(id),
      clientStarted: (id) => w.clients.get(id)?.started === true,
      worker: (id) => everyone || inst.conns.has(id),
      handshake: () => false,
      clients: () => [...inst.clients],
      workers: () => [...inst.conns],
      handshakes: () => [],
    },
    run: (effect) => run(w, inst, effect),
    arm(timer, ms) {
      later(w, inst, ms, { kind: timer === "flush" ? "flushDue" : "retryDue" });
    },
    log() {},
    fact: (f) => fact(w, inst, f),
  };
}

function fact(w: World, inst: Inst, f: HostFact): void {
  switch (f.kind) {
    case "applied":
      for (const id of f.died) w.dead.add(id);
      if (w.tokenFirstRead) {
        for (const e of f.effects) charged(w, e);
      }
      return;
    case "rejoined":
      w.stats.rejoins++;
      return;
    case "left":
      return instanceLeft(w, inst);
    case "inputFailed":
      return violate(
        w,
        "coreAccepts",
        `${inst.host.inst.id} on ${f.input}: ${f.error}`,
      );
    case "note":
      return;
  }
}

/**
 * The first replica to apply a completion charges its tokens (the ledger
 * stands for the fleet); every completed request charges what it used
 * (streamsCounted, issue 33).
 */
function charged(w: World, e: Effect): void {
  if (e.kind !== "requestFinished" || e.outcome !== "completed") return;
  const c = w.clients.get(e.requestId);
  if (c === undefined) return;
  if (e.tenant === TOKEN_TENANT) {
    tokenCharged(w.tokens, w.history, e.requestId, tokensOfClient(c));
  }
  // The completion tokens the core's own rules give (the worker's counts, or
  // one per content delta): the prompt side of an estimate is the usage
  // rules' to decide (core/state/usage.ts), not this check's.
  const want = c.stream && !c.asksUsage
    ? CHUNKS
    : tokensOfRequest(c.n).completion;
  const got = e.usage.completion ?? 0;
  if (got !== want || tokensOf(e.usage) < want) {
    violate(
      w,
      "streamsCounted",
      `${c.id} (${c.stream ? "stream" : "whole"}${
        c.asksUsage ? ", usage asked" : ""
      }) charged ${got} completion tokens, used ${want}`,
    );
  }
}

/** Kept by the host until the engine acknowledges it. */
function send(
  w: World,
  inst: Inst,
  record: ClusterRecord,
  ticket: number,
): void {
  const data = encodeRecord(record);
  const at = Math.max(inst.lastAppendAtMs, w.now + w.prng.int(0, 3));
  inst.lastAppendAtMs = at;
  const epoch = w.log.epoch;
  // Acknowledged even while frozen: the process reads the reply on thaw.
  const ack = () => {
    if (inst.proc === "running" || inst.proc === "frozen") {
      stepHost(inst.host, { kind: "appendAcked", ticket, atMs: w.now });
    }
  };
  w.queue.push(at, { k: "append", data, epoch, i: inst.idx, ack });
  if (w.dieAfterAppend === inst) {
    w.dieAfterAppend = null;
    w.queue.push(at, { k: "kill", inst });
  }
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

/** One entry read by one replica: the host applies it; the run checks digests. */
function readEntry(w: World, inst: Inst, entry: LogEntry, gen: number): void {
  const s = inst.host.inst;
  if (w.mutant === "noDedup") {
    // Forget the last applied seq: a retried append is applied twice.
    for (const view of s.cluster.instances.values()) {
      view.seq = Math.max(0, view.seq - 1);
    }
  }
  // The mutant stamps events with each replica's own reading time.
  const read = w.mutant === "applyTimeClock"
    ? { ...entry, ms: w.now + inst.idx }
    : w.mutant === "tokensPerInstance"
    ? ownTokensOnly(inst, entry)
    : entry;
  w.tokenFirstRead = tokenEntryRead(
    w.tokens,
    w.history,
    entry.id,
    w.s.tokenLimited ? () => decodeRecord(read.data) : null,
  );
  w.applying = entry;
  w.applyingSeen.clear();
  feed(w, inst, { kind: "entryRead", generation: gen, entry: read });
  w.applying = null;
  w.tokenFirstRead = false;
  const seq = Number(entry.id.slice(entry.id.indexOf("-") + 1));
  if ((entry.ms + seq) % DIGEST_EVERY !== 0 || s.position !== entry.id) return;
  const key = `${w.log.epoch}:${entry.id}`;
  const d = stateDigest(s.cluster);
  const seen = w.digests.get(key);
  w.stats.digestChecks++;
  if (seen === undefined) w.digests.set(key, d);
  else if (seen !== d) {
    violate(w, "replicasAgree", `replica ${s.id} at ${key}: ${d} ≠ ${seen}`);
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

/** An effect this instance holds the socket of (the host's ownership filter passed it). */
function run(w: World, inst: Inst, effect: Effect): void {
  const owner = ownerOf(effect);
  if (owner.kind === "workerSocket") return toWorker(w, inst, effect);
  if (owner.kind === "client") return toClient(w, inst, effect);
}

/** Each socket effect of an entry runs on one instance only (keyed by entry and target). */
function count(w: World, effect: Effect, target: string): void {
  if (w.applying === null) return;
  const base = `${w.log.epoch}:${w.applying.id}:${effect.kind}:${target}`;
  const nth = (w.applyingSeen.get(base) ?? 0) + 1;
  w.applyingSeen.set(base, nth);
  const key = `${base}:${nth}`;
  const n = (w.executed.get(key) ?? 0) + 1;
  w.executed.set(key, n);
  if (n > 1) violate(w, "socketEffectsOnce", `effect ${key} ran ${n} times`);
}

function toWorker(w: World, inst: Inst, effect: Effect): void {
  if (
    effect.kind !== "sendToWorker" && effect.kind !== "closeWorker" &&
    effect.kind !== "rejectWorker"
  ) return;
  const conn = w.conns.get(effect.workerId);
  if (conn === undefined || !conn.open) return;
  count(w, effect, effect.workerId);
  if (effect.kind === "rejectWorker" && w.applying === null) {
    // The defect of issue 23: the instance forgets the handshake unanswered,
    // and the worker waits on it for good.
    if (w.mutant === "handshakeLeaks") return void inst.conns.delete(conn.id);
  }
  if (effect.kind !== "sendToWorker") return closeConn(w, conn, true);
  const m = effect.message;
  if (m.type === "request") {
    w.trace?.(
      `${w.now} ${inst.host.inst.id} sends ${m.request_id} to ${conn.id}`,
    );
    const c = w.clients.get(m.request_id);
    if (c?.tenant === "rl") {
      const set = w.dispatchedRl.get(w.history) ?? new Set();
      set.add(m.request_id);
      w.dispatchedRl.set(w.history, set);
    }
    if (c?.tenant === TOKEN_TENANT) {
      tokenDispatched(w.tokens, w.history, m.request_id);
    }
    if (c !== undefined) {
      const per = w.answers.get(c.id) ?? new Map<string, string>();
      per.set(conn.id, answerOf(c, conn));
      w.answers.set(c.id, per);
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
    observe(w, w.insts[conn.inst]!, {
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

function toClient(w: World, inst: Inst, effect: Effect): void {
  if (
    effect.kind !== "startStream" && effect.kind !== "writeChunk" &&
    effect.kind !== "endStream" && effect.kind !== "respond" &&
    effect.kind !== "respondError"
  ) return;
  const c = w.clients.get(effect.requestId);
  if (c === undefined || !c.connected || !inst.clients.has(c.id)) return;
  count(w, effect, effect.requestId);
  if (effect.kind === "startStream") c.started = true;
  else if (effect.kind === "writeChunk") {
    c.received += chunkAsText(effect.chunk);
  } else if (effect.kind === "endStream") {
    if (effect.error === null && w.applying === null) w.stats.endedHere++;
    endClient(w, c.id, 200, effect.error?.code ?? null);
  } else if (effect.kind === "respond") {
    c.received = piecesAsText(effect.bodyPieces ?? [], effect.body);
    endClient(w, c.id, effect.status, null);
  } else endClient(w, c.id, effect.error.status, effect.error.code);
}

// ---- the direct path's links -------------------------------------------------------

function sendPiece(
  w: World,
  inst: Inst,
  to: InstanceId,
  url: string,
  piece: DirectChunk,
): void {
  let link = w.links.find((l) => l.from === inst.idx && l.to === url);
  if (link === undefined) {
    link = {
      from: inst.idx,
      fromId: inst.host.inst.id,
      to: url,
      toId: to,
      lastAtMs: 0,
      severed: false,
    };
    w.links.push(link);
  }
  w.stats.piecesSent++;
  if (w.crashAtEnd && piece.end !== undefined) {
    w.crashAtEnd = false;
    w.dieAfterAppend = inst;
  }
  w.trace?.(
    `${w.now} ${inst.host.inst.id} piece ${piece.requestId}#${piece.seq} to ${to}`,
  );
  const at = Math.max(
    link.lastAtMs,
    w.now + w.prng.int(1, w.prng.chance(1, 3) ? 40 : 3),
  );
  link.lastAtMs = at;
  w.queue.push(at, {
    k: "piece",
    link,
    piece,
    lostIfSenderDies: w.prng.chance(1, 2),
  });
}

function deliverPiece(w: World, a: Extract<Action, { k: "piece" }>): void {
  // A piece on a link whose sender died may be lost with the link.
  if (a.link.severed && a.lostIfSenderDies) return;
  const to = w.insts.find((x) => x.url === a.link.to);
  if (to === undefined || to.proc === "crashed" || to.proc === "exited") return;
  if (to.proc === "frozen") {
    w.queue.push(to.thawAtMs, a); // its socket buffers until it thaws
    return;
  }
  feed(w, to, { kind: "pieceArrived", piece: a.piece, from: a.link.fromId });
  const c = w.clients.get(a.piece.requestId);
  const conn = w.conns.get(a.piece.workerId);
  if (a.piece.end !== undefined && c?.inst === to.idx && conn !== undefined) {
    completed(w, c, conn);
  }
}

/** The client's instance learnt that `conn` completed the client's answer. */
function completed(w: World, c: Client, conn: Conn): void {
  const per = w.completedAt.get(c.id) ?? new Map<string, number>();
  per.set(answerOf(c, conn), w.now);
  w.completedAt.set(c.id, per);
}

/** The instance closes its outbound links: each peer hears its inbound one close. */
function closeLinksFrom(w: World, inst: Inst): void {
  for (const l of w.links.filter((l) => l.from === inst.idx)) {
    closeLink(w, l, false);
  }
}

/**
 * A link closes: the receiving end learns (peerGone); when the receiving
 * process died, the sending end learns too (linkBroke).
 */
function closeLink(w: World, l: Link, receiverDied: boolean): void {
  w.links = w.links.filter((x) => x !== l);
  w.linksLost = true;
  const to = w.insts.find((x) => x.url === l.to);
  if (to !== undefined && !receiverDied) {
    // After the pieces already on the link (one socket: in order).
    const at = Math.max(l.lastAtMs, w.now) + 1;
    later(w, to, at - w.now, { kind: "peerGone", from: l.fromId });
  }
  const from = w.insts[l.from];
  if (from !== undefined && receiverDied) {
    later(w, from, 1, { kind: "linkBroke", to: l.toId });
  }
}

/** A process ends: every link to or from it closes. */
function linksDie(w: World, inst: Inst): void {
  for (const l of [...w.links]) {
    if (l.to === inst.url) closeLink(w, l, true);
    else if (l.from === inst.idx) closeLink(w, l, false);
  }
}

// ---- observed events ---------------------------------------------------------------

/** What the instance's sockets and timers report. */
function observe(w: World, inst: Inst, e: Event): void {
  feed(w, inst, { kind: "observed", event: e });
}

function endClient(
  w: World,
  id: string,
  status: number,
  errorCode: string | null,
): void {
  const c = w.clients.get(id);
  if (c === undefined || !c.connected) return;
  const error = errorCode !== null || status >= 400;
  c.ends++;
  w.trace?.(`${w.now} ${id} ends ${status}${error ? ` (${errorCode})` : ""}`);
  if (c.ends > 1) violate(w, "endsOnce", `${id} ended ${c.ends} times`);
  c.status = status;
  c.error = error;
  c.errorCode = errorCode;
  gone(w, c);
  w.insts[c.inst]?.clients.delete(id);
  w.stats.ended++;
  if (c.stream && !error) w.stats.streamsWhole++;
  if (errorCode === "stream_too_large") w.stats.sizeCuts++;
}

/** endLocal as the mutant leaveAtOnce does it: every client and socket ended. */
function dropLocal(w: World, inst: Inst, status: number): void {
  for (const r of [...inst.clients]) endClient(w, r, status, "shutting_down");
  inst.clients.clear();
  for (const id of [...inst.conns]) {
    const c = w.conns.get(id);
    if (c !== undefined) closeConn(w, c, true);
  }
}

function instanceLeft(w: World, inst: Inst): void {
  inst.proc = "exited";
  w.stats.leaves++;
  linksDie(w, inst);
  for (const l of w.leaves) if (l.inst === inst.idx) l.done = true;
  w.trace?.(`${w.now} ${inst.host.inst.id} left the cluster`);
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
  if (conn.open && inst.proc === "running") {
    observe(w, inst, {
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
  const candidates = w.insts.filter((x) => x.proc === "running");
  if (candidates.length === 0) {
    w.queue.push(w.now + 500, { k: "connect", w: worker });
    return;
  }
  const inst = w.prng.pick(candidates);
  w.trace?.(`${w.now} worker ${worker} connects to ${inst.host.inst.id}`);
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
  observe(w, inst, {
    kind: "workerConnectAttempted",
    atMs: w.now,
    workerId: conn.id,
    provider: "local",
    clientIp: "10.0.0.1",
    secretValid: true,
  });
  if (!conn.open) return; // refused at once
  observe(w, inst, {
    kind: "registerReceived",
    atMs: w.now,
    workerId: conn.id,
    workerName: `w${worker}`,
    models: ["m"],
    maxConcurrent: 2,
    protocolVersion: "2026-04-bridge-v1",
    currentLoad: 0,
    // Odd workers stream bytes (chunk-bytes-v1, issue 18): the log's record
    // codec and the peer links carry them.
    ...(worker % 2 === 1 ? { extensions: [EXTENSION_CHUNK_BYTES] } : {}),
  });
}

/** Chunk `step` of the answer connection `conn` gives client `c`: one content delta. */
function chunkOf(c: Client, conn: Conn, step: number): string {
  const pad = c.big ? "x".repeat(STREAM_CHARS_MAX / 2) : "";
  return `data: {"choices":[{"delta":{"content":"${conn.id}:${c.id}:${step}${pad}"}}]}\n\n`;
}

/** The whole answer of one dispatch (stream: its chunks; else its body). */
function answerOf(c: Client, conn: Conn): string {
  if (!c.stream) return `body-${c.id}`;
  let text = "";
  for (let step = 0; step < CHUNKS; step++) text += chunkOf(c, conn, step);
  return text;
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
  if (inst.proc === "frozen") {
    w.queue.push(w.now + 100, a);
    return;
  }
  if (inst.proc !== "running") return;
  const c = w.clients.get(a.requestId);
  const stream = c?.stream ?? false;
  if (a.step < CHUNKS && stream && c !== undefined) {
    const text = chunkOf(c, conn, a.step);
    observe(w, inst, {
      kind: "chunkReceived",
      atMs: w.now,
      workerId: conn.id,
      requestId: a.requestId,
      chunk: conn.worker % 2 === 1 ? UTF8.encode(text) : text,
    });
  }
  if (a.step < CHUNKS) {
    w.queue.push(w.now + w.prng.int(5, 60), { ...a, step: a.step + 1 });
    return;
  }
  if (c !== undefined && c.inst === conn.inst) completed(w, c, conn);
  observe(w, inst, {
    kind: "completeReceived",
    atMs: w.now,
    workerId: conn.id,
    requestId: a.requestId,
    statusCode: 200,
    headers: {},
    body: stream ? "" : `body-${a.requestId}`,
    // A stream whose client did not ask for usage carries none: the core
    // counts its content deltas (issue 26), wherever its chunks went.
    tokenCounts: c !== undefined && c.stream && !c.asksUsage
      ? null
      : tokenCountsOf(a.requestId),
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

/** The tokens a completed request of this client charges: its counts, or its deltas. */
function tokensOfClient(c: Client): number {
  if (c.stream && !c.asksUsage) return CHUNKS;
  const t = tokensOfRequest(c.n);
  return t.prompt + t.completion;
}

function arrive(w: World, n: number): void {
  const candidates = w.insts.filter((x) => x.proc === "running");
  if (candidates.length === 0) return;
  const inst = w.prng.pick(candidates);
  const id = `r${n}`;
  w.trace?.(`${w.now} ${id} arrives at ${inst.host.inst.id}`);
  const stream = w.prng.chance(1, 2);
  const c: Client = {
    id,
    n,
    inst: inst.idx,
    tenant: w.prng.chance(1, 3) ? "rl" : w.prng.pick(["a", "b"]),
    stream,
    asksUsage: stream && n % 2 === 0,
    big: stream && n % 9 === 4,
    arrivedAtMs: w.now,
    endedAtMs: null,
    connected: true,
    started: false,
    received: "",
    ends: 0,
    status: null,
    error: false,
    errorCode: null,
  };
  w.clients.set(id, c);
  inst.clients.add(id);
  if (w.prng.chance(1, 8)) {
    w.queue.push(w.now + w.prng.int(10, 400), { k: "abort", requestId: id });
  }
  observe(w, inst, {
    kind: "requestReceived",
    atMs: w.now,
    requestId: id,
    api: "openai",
    endpointPath: "/v1/chat/completions",
    model: "m",
    isStreaming: c.stream,
    body: JSON.stringify({
      model: "m",
      n,
      ...(c.stream ? { stream: true } : {}),
      ...(c.asksUsage ? { stream_options: { include_usage: true } } : {}),
    }),
    headers: {},
    tenant: c.tenant,
  });
}

/** The client stops waiting: answered, aborted, or its instance died. */
function gone(w: World, c: Client): void {
  c.connected = false;
  c.endedAtMs = w.now;
}

function abort(w: World, requestId: string): void {
  const c = w.clients.get(requestId);
  const inst = c === undefined ? undefined : w.insts[c.inst];
  if (c === undefined || !c.connected || inst === undefined) return;
  gone(w, c);
  inst.clients.delete(c.id);
  observe(w, inst, {
    kind: "clientDisconnected",
    atMs: w.now,
    requestId: c.id,
  });
}

// ---- faults -------------------------------------------------------------------

function serving(w: World): Inst[] {
  return w.insts.filter((x) =>
    x.proc === "running" && x.host.inst.phase === "serving"
  );
}

function fault(w: World, f: ClusterFault): void {
  const live = serving(w);
  w.trace?.(`${w.now} fault ${f}`);
  w.lastFaultMs = w.now;
  for (const l of w.leaves) if (!l.done) l.disturbed ||= f !== "duplicate";
  switch (f) {
    case "crash":
      if (live.length < 2) return;
      return crash(w, w.prng.pick(live));
    case "crashAtEnd":
      w.crashAtEnd = true;
      return;
    case "stall": {
      if (live.length < 2) return;
      const v = w.prng.pick(live);
      v.proc = "frozen";
      v.frozenAtMs = w.now;
      v.thawAtMs = w.now + w.prng.int(1_500, 8_000);
      w.queue.push(v.thawAtMs, { k: "thaw", i: v.idx });
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
      // With a stream in flight: what a hold must get right.
      const busy = live.filter(streaming(w));
      if (busy.length === 0 && putOff(w, f)) return;
      const v = w.prng.pick(busy.length > 0 ? busy : live);
      v.cutUntil = w.now + w.prng.int(300, 2_000);
      feed(w, v, {
        kind: "logLost",
        reason: "engine connection closed",
        reset: false,
      });
      return;
    }
    case "reset":
      // The engine restarts empty: every connection breaks, the log is new.
      if (!wholeWaiting(w) && putOff(w, f)) return;
      wipe(w.log);
      w.history++;
      return everyoneLoses(w, w.now + w.prng.int(500, 2_000));
    case "failover":
      // The master dies; a replica that missed the last entries takes over.
      if (!wholeWaiting(w) && putOff(w, f)) return;
      loseTail(w.log, w.prng.int(1, 6));
      w.history++;
      return everyoneLoses(w, w.now + w.prng.int(300, 1_500));
    case "leave":
      return leave(w, live);
    case "duplicate":
      return; // acts on appends (send)
  }
}

/** Whether an instance holds a client whose stream has begun. */
function streaming(w: World): (x: Inst) => boolean {
  return (x) =>
    [...x.clients].some((id) => w.clients.get(id)?.started === true);
}

/**
 * Whether a client has its whole stream (its instance learnt it completed)
 * and waits for the log's end: what a lost log must end cleanly (issue 33).
 */
function wholeWaiting(w: World): boolean {
  for (const [id, per] of w.completedAt) {
    const c = w.clients.get(id);
    if (c !== undefined && c.connected && per.has(c.received)) return true;
  }
  return false;
}

/**
 * A fault that must meet a stream in flight waits for one (a few ms at a
 * time, until well after the fault window); true when it was put off.
 */
function putOff(w: World, f: ClusterFault): boolean {
  if (w.now >= FAULTS_UNTIL_MS + 10_000) return false;
  w.queue.push(w.now + 7, { k: "fault", fault: f });
  return true;
}

function crash(w: World, v: Inst): void {
  if (v.proc !== "running" && v.proc !== "frozen") return;
  w.trace?.(`${w.now} ${v.host.inst.id} crashes`);
  v.proc = "crashed";
  // Its sockets die with it: workers reconnect elsewhere, clients are gone,
  // its peer links close (what was still on them may be lost).
  for (const id of [...v.conns]) closeConn(w, w.conns.get(id)!, true);
  for (const r of v.clients) gone(w, w.clients.get(r)!);
  v.clients.clear();
  for (const l of w.links) if (l.from === v.idx) l.severed = true;
  linksDie(w, v);
}

function everyoneLoses(w: World, backAtMs: number): void {
  w.log.stalledUntil = backAtMs;
  w.log.waiting = [];
  w.linksLost = true;
  for (const x of w.insts) {
    if (x.proc === "frozen") x.broken = true;
    // The engine tells: the log is not the one applied (new epoch, lost tail).
    feed(w, x, { kind: "logLost", reason: "log reset", reset: true });
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
  if (w.mutant === "leaveDropsDirect") {
    v.host.senders.clear();
    v.host.receivers.clear();
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
    streamCharsMax: STREAM_CHARS_MAX,
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
    answers: new Map(),
    completedAt: new Map(),
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
      piecesSent: 0,
      streamsWhole: 0,
      sizeCuts: 0,
      endedHere: 0,
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
    applyingSeen: new Map(),
    lastFaultMs: 0,
    linksLost: false,
    links: [],
    acks: [],
    crashAtEnd: false,
    dieAfterAppend: null,
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
  w.queue.push(w.now + x.idx, { k: "join", inst: x });
  w.queue.push(w.now + TICK_MS + x.idx, { k: "tick", i: x.idx });
}

function step(w: World, a: Action): void {
  switch (a.k) {
    case "tick":
      return tick(w, a.i);
    case "poll":
      return poll(w, a.i, a.gen);
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
    case "input":
      if (w.insts[a.i] !== a.inst) return;
      // A stopped process takes its timers and replies when it thaws.
      if (a.inst.proc === "frozen") {
        return void w.queue.push(a.inst.thawAtMs, a);
      }
      if (a.inst.proc === "running") stepHost(a.inst.host, a.input);
      return;
    case "join":
      return join(w, a.inst);
    case "resume":
      return resume(w, a.inst);
    case "catchUp":
      return catchUp(w, w.insts[a.i]!, a.gen);
    case "snapshot":
      return storeSnapshot(w, a);
    case "piece":
      return deliverPiece(w, a);
    case "kill":
      // As a crash: never the last instance serving.
      if (serving(w).filter((x) => x !== a.inst).length === 0) return;
      return crash(w, a.inst);
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
  if (inst.proc === "crashed" || inst.proc === "exited") return;
  if (inst.proc === "running") {
    observe(w, inst, { kind: "tick", atMs: w.now, unixMs: w.now });
  }
  w.queue.push(w.now + TICK_MS, { k: "tick", i });
}

function join(w: World, inst: Inst): void {
  if (w.insts[inst.idx] !== inst || inst.proc !== "running") return;
  if (inst.host.inst.phase !== "joining") return;
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
  if (w.insts[inst.idx] !== inst || inst.proc !== "running") return;
  if (inst.host.inst.phase !== "holding") return;
  if (!reachable(w, inst)) {
    return feed(w, inst, { kind: "resumeFailed", error: "engine unreachable" });
  }
  const last = inst.host.inst.position;
  feed(w, inst, {
    kind: "resumeRead",
    epoch: epochName(w.log),
    lastEntryKept: last === "0"
      ? null
      : w.log.entries.some((e) => e.id === last),
  });
}

function catchUp(w: World, inst: Inst, gen: number): void {
  if (inst.proc !== "running" || gen !== inst.host.generation) return;
  if (!reachable(w, inst)) {
    return feed(w, inst, {
      kind: "readFailed",
      generation: gen,
      error: "engine unreachable",
    });
  }
  for (const entry of readAfter(w.log, inst.host.inst.position, 1e9)) {
    if (gen !== inst.host.generation) return;
    readEntry(w, inst, entry, gen);
  }
  feed(w, inst, { kind: "caughtUp", generation: gen });
  schedulePoll(w, inst);
}

function schedulePoll(w: World, inst: Inst): void {
  const slow = w.s.slowReader === true && inst.idx === w.s.instances - 1;
  w.queue.push(w.now + (slow ? w.prng.int(20, 150) : w.prng.int(1, 15)), {
    k: "poll",
    i: inst.idx,
    gen: inst.host.generation,
  });
}

function poll(w: World, i: number, gen: number): void {
  const inst = w.insts[i]!;
  if (inst.proc === "crashed" || inst.proc === "exited") return;
  if (gen !== inst.host.generation) return;
  if (inst.proc === "running" && reachable(w, inst)) {
    if (inst.host.inst.epoch !== epochName(w.log)) {
      // Wiped while it was frozen: its commands fail now.
      return feed(w, inst, {
        kind: "logLost",
        reason: "log reset",
        reset: true,
        generation: gen,
      });
    }
    for (const entry of readAfter(w.log, inst.host.inst.position, 1_000)) {
      if (gen !== inst.host.generation || inst.proc !== "running") return;
      readEntry(w, inst, entry, gen);
    }
  }
  if (gen === inst.host.generation) schedulePoll(w, inst);
}

function thaw(w: World, inst: Inst): void {
  if (inst.proc !== "frozen") return;
  inst.proc = "running";
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
    });
  }
  poll(w, inst.idx, inst.host.generation);
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
  const inst = a.inst;
  if (a.epoch !== w.log.epoch || !reachable(w, inst)) return;
  putSnapshot(w.log, a.snapshot);
  if (a.trimBeforeId !== null) trimBefore(w.log, a.trimBeforeId);
  w.stats.snapshots++;
  feed(w, inst, {
    kind: "snapshotStored",
    id: a.snapshot.id,
    digest: a.digest,
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
    for (const detail of fleetTokenLimitBroken(w.tokens, tokensOfId(w))) {
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

function tokensOfId(w: World): (id: string) => number {
  return (id) => {
    const c = w.clients.get(id);
    return c === undefined ? 0 : tokensOfClient(c);
  };
}
