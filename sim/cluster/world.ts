// The cluster simulator (issues 16, 23, 34): N virtual relay instances share one
// virtual log (log.ts) and talk over virtual peer links (links.ts). Each
// instance is the core's own host, core/cluster/host.ts (the life cycle, the
// outbox, the ownership filter and the direct data path), run over the ports
// of instances.ts, as shell/server/cluster/instance_io.ts implements them over
// Redis and WebSockets. Virtual workers and clients (fleet.ts) attach to
// instances; streams go direct between instances; seeded faults (faults.ts)
// crash, freeze or stop instances, duplicate appends, stall the log, break one
// instance's connection, wipe the log, or fail it over to a replica that lost
// its tail. Fleet-wide and data-path invariants are checked in the same runs
// (checks.ts). This file draws the scenario and runs the clock and the log.
import { stepHost } from "../../core/cluster/host.ts";
import { makeConfig } from "../../core/mod.ts";
import {
  appendEntry,
  epochName,
  newLog,
  putSnapshot,
  readAfter,
  trimBefore,
} from "./log.ts";
import { END_MS, endOfRun, RATE_LIMIT, STREAM_CHARS_MAX } from "./checks.ts";
import {
  fleetTokenLimitBroken,
  newTokenLedger,
  TOKEN_LIMIT,
  TOKEN_TENANT,
} from "./tokens.ts";
import { EventQueue } from "../event_queue.ts";
import { Prng } from "../prng.ts";
import {
  type Action,
  ARRIVALS_UNTIL_MS,
  CLUSTER_FAULTS,
  type ClusterMutant,
  type ClusterRun,
  type ClusterScenario,
  COMMAND_TIMEOUT_MS,
  FAULTS_FROM_MS,
  FAULTS_UNTIL_MS,
  feed,
  type Inst,
  observe,
  START_MS,
  TICK_MS,
  type World,
} from "./shape.ts";
import { abort, arrive, connect, job, tokensOfClient } from "./fleet.ts";
import { crash, fault, serving } from "./faults.ts";
import { deliverPiece } from "./links.ts";
import { newInst, reachable, readEntry } from "./instances.ts";
export {
  CLUSTER_FAULTS,
  CLUSTER_MUTANTS,
  type ClusterFault,
  type ClusterInvariant,
  type ClusterMutant,
  type ClusterRun,
  type ClusterScenario,
} from "./shape.ts";

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
