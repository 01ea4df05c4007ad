// The cluster simulator's shape (issue 34): its scenarios, faults, mutants,
// the world a run keeps, the actions its virtual clock takes in turn, and the
// few helpers every part uses (an input to an instance, a dispatch's answer).
import {
  type Host,
  type HostInput,
  stepHost,
  type Unstamped,
} from "../../core/cluster/host.ts";
import type { LogEntry, Snapshot } from "../../core/cluster/instance.ts";
import type { DirectChunk, InstanceId } from "../../core/cluster/mod.ts";
import type { Config, Event } from "../../core/mod.ts";
import type { VirtualLog } from "./log.ts";
import { type ClusterInvariant, STREAM_CHARS_MAX } from "./checks.ts";
import type { TokenLedger } from "./tokens.ts";
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

export const TICK_MS = 250;
export const ARRIVALS_UNTIL_MS = 20_000;
export const FAULTS_FROM_MS = 2_000;
export const FAULTS_UNTIL_MS = 18_000;
export const DIGEST_EVERY = 128;
export const START_MS = 1_000;
/** A frozen instance's Redis commands time out after this (redis_engine.ts). */
export const COMMAND_TIMEOUT_MS = 3_000;
/** Chunks of a stream; a "big" one pads each past the stream limit together. */
export const CHUNKS = 3;

export type Inst = {
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

export type Client = {
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

export type Conn = {
  id: string;
  worker: number;
  inst: number;
  open: boolean;
  draining: boolean;
  jobs: Set<string>;
};

/** An open peer link, as its two ends know it; its pieces land in order (one socket). */
export type Link = {
  from: number;
  fromId: InstanceId;
  to: string;
  toId: InstanceId;
  lastAtMs: number;
  /** Its sender died: pieces still on it may be lost (a clean close sends them). */
  severed: boolean;
};

/** A graceful leave being watched: its clients must not be cut short. */
export type Leave = {
  inst: number;
  startMs: number;
  clients: Set<string>;
  /** Another fault struck meanwhile: the leave is not judged. */
  disturbed: boolean;
  done: boolean;
};

export const UTF8 = new TextEncoder();

export type Action =
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

export type World = {
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

// ---- what every part of the simulator uses ------------------------------------

/** An input for a running process, stamped with the virtual clock. */
export function feed(w: World, inst: Inst, input: Unstamped): void {
  if (inst.proc !== "running") return;
  stepHost(inst.host, { ...input, atMs: w.now } as HostInput);
}

/** An input the process takes later (`ms` from now), if it is still running then. */
export function later(
  w: World,
  inst: Inst,
  ms: number,
  input: Unstamped,
): void {
  w.queue.push(w.now + ms, {
    k: "input",
    i: inst.idx,
    inst,
    input: { ...input, atMs: w.now + ms } as HostInput,
  });
}

/** What the instance's sockets and timers report. */
export function observe(w: World, inst: Inst, e: Event): void {
  feed(w, inst, { kind: "observed", event: e });
}

/** Chunk `step` of the answer connection `conn` gives client `c`: one content delta. */
export function chunkOf(c: Client, conn: Conn, step: number): string {
  const pad = c.big ? "x".repeat(STREAM_CHARS_MAX / 2) : "";
  return `data: {"choices":[{"delta":{"content":"${conn.id}:${c.id}:${step}${pad}"}}]}\n\n`;
}

/** The whole answer of one dispatch (stream: its chunks; else its body). */
export function answerOf(c: Client, conn: Conn): string {
  if (!c.stream) return `body-${c.id}`;
  let text = "";
  for (let step = 0; step < CHUNKS; step++) text += chunkOf(c, conn, step);
  return text;
}
