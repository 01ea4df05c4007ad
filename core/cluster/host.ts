// One cluster instance's host (issue 34): everything between the instance's
// life cycle (instance.ts) and the outside world, pure and synchronous like
// `stepInstance`. The shell (shell/server/cluster/instance_io.ts, over Redis
// and WebSockets) and the cluster simulator (sim/cluster/instances.ts, over a
// virtual log and virtual links) implement the same `ClusterPorts` and feed
// the same `HostInput`s; what used to be written once per host lives here:
// - the action interpreter (each `InstanceAction` carried out),
// - the ownership filter (which effects this instance runs, ownership.ts),
// - the outbox: a turn's observed events batched into one record, records
//   kept until acknowledged and appended again after a hold,
// - refusing what was not admitted when the log stops answering,
// - ending what this instance holds (`endLocal`), completed streams cleanly,
// - the whole direct data path (data_path.ts): chunks to the client's
//   instance, pieces to the client, cuts, and its timers.
// Every completion comes back as an input stamped with the host's one clock
// (`atMs`, monotonic ms); stale reads are told apart by their generation.
import { assertNever } from "../assert_never.ts";
import type { ClientError, Effect } from "../effect.ts";
import type { Event, RequestId, WorkerId } from "../events/event.ts";
import { finish } from "../state/requests.ts";
import { initialState, type Request } from "../state/state.ts";
import {
  completedStream,
  DATA_PATH_DEFAULTS,
  type DirectChunk,
  dispatched,
  expectPieces,
  forgetSent,
  linkBroke,
  logEffect,
  peerGone,
  pieceArrived,
  type ReceiverAction,
  receiverDue,
  type Receivers,
  requestEnded,
  routeChunk,
  routeEnd,
  type Senders,
  sentDeltas,
  type StreamEnd,
} from "./data_path.ts";
import {
  appending,
  cutRecord,
  eventsRecord,
  type InstanceAction,
  type InstanceInput,
  type InstanceState,
  type LogEntry,
  noteRecord,
  recording,
  route,
  type Snapshot,
  stepInstance,
  UNAVAILABLE,
} from "./instance.ts";
import type { ClusterNote } from "./note.ts";
import { type EffectOwner, isOrigin, logsOn, ownerOf } from "./ownership.ts";
import {
  type ClusterRecord,
  type CutReason,
  decodeRecord,
  type InstanceId,
} from "./record.ts";

export type LogLevel = "debug" | "info" | "warn" | "error";

/** The host's timers: the rejoin/resume retry, and the end of a turn (flush). */
export type HostTimer = "retry" | "flush";

/** What the host tells its shell about, beyond effects. */
export type HostFact =
  | { kind: "note"; note: ClusterNote; mine: boolean }
  | { kind: "rejoined"; fresh: boolean }
  /** The leave is complete: the shell finishes its shutdown. */
  | { kind: "left" }
  /**
   * A record was applied here: the replica's effects before the ownership
   * filter, and the instances the record declared gone (issue 34: a typed
   * fact, not a log line to match).
   */
  | {
    kind: "applied";
    effects: readonly Effect[];
    died: readonly InstanceId[];
  }
  /** The core threw on an input: our bug, reported; the host goes on. */
  | { kind: "inputFailed"; input: string; error: string };

/** What this instance holds: its clients, worker sockets, pending handshakes. */
export type Holdings = {
  client(requestId: RequestId): boolean;
  /** Whether the client's response head went out (a stream ends, not errs). */
  clientStarted(requestId: RequestId): boolean;
  worker(workerId: WorkerId): boolean;
  /** A worker handshake held here, not yet answered. */
  handshake(workerId: WorkerId): boolean;
  clients(): readonly RequestId[];
  workers(): readonly WorkerId[];
  handshakes(): readonly WorkerId[];
};

/**
 * The outside world, as a host sees it. Every call returns at once; what it
 * starts reports back through `stepHost` (the input named beside each).
 */
export type ClusterPorts = {
  /** Append to the log (appendAcked / appendFailed with `ticket`). */
  append(record: ClusterRecord, ticket: number): void;
  /**
   * Catch up from the instance's position (entryRead... then caughtUp, or
   * readFailed), then tail the log (entryRead..., or logLost), every input
   * with `generation`; stop once the host's generation moved on.
   */
  read(generation: number): void;
  /** Read the epoch and the snapshot (joinRead / joinFailed). */
  join(): void;
  /** Read the epoch and whether `lastEntryId` is still in the log (resumeRead / resumeFailed). */
  resume(lastEntryId: string | null): void;
  /** Store the snapshot, trim the log before `trimBeforeId` (snapshotStored). */
  putSnapshot(
    snapshot: Snapshot,
    trimBeforeId: string | null,
    digest: string,
  ): void;
  /** Send an answer piece to instance `to` at `url` (a broken link: linkBroke). */
  sendPiece(to: InstanceId, url: string, piece: DirectChunk): void;
  /** Close every outbound peer link (this instance's id changed, or it stops). */
  closeLinks(): void;
  holds: Holdings;
  /** Carry out one effect here (its owner is here). */
  run(effect: Effect): void;
  /** Arm a timer (retryDue / flushDue); the host arms each at most once at a time. */
  arm(timer: HostTimer, ms: number): void;
  log(
    level: LogLevel,
    message: string,
    fields: Record<string, string | number>,
  ): void;
  fact(fact: HostFact): void;
};

/** The data path rules a host uses: the real ones, or a simulator mutant's. */
export type DataPathRules = {
  routeChunk: typeof routeChunk;
  routeEnd: typeof routeEnd;
  linkBroke: typeof linkBroke;
  dispatched: typeof dispatched;
  pieceArrived: typeof pieceArrived;
  expectPieces: typeof expectPieces;
  peerGone: typeof peerGone;
  receiverDue: typeof receiverDue;
  completedStream: typeof completedStream;
};

export const DATA_PATH_RULES: DataPathRules = {
  routeChunk,
  routeEnd,
  linkBroke,
  dispatched,
  pieceArrived,
  expectPieces,
  peerGone,
  receiverDue,
  completedStream,
};

type Inputs =
  | { kind: "observed"; event: Event }
  | { kind: "joinRead"; epoch: string; snapshot: Snapshot | null }
  | { kind: "joinFailed"; error: string; refused: boolean }
  | { kind: "entryRead"; generation: number; entry: LogEntry }
  | { kind: "caughtUp"; generation: number }
  | { kind: "readFailed"; generation: number; error: string }
  /** `generation`: from a read loop (stale ones are ignored); absent: the engine itself. */
  | { kind: "logLost"; reason: string; reset: boolean; generation?: number }
  | { kind: "resumeRead"; epoch: string; lastEntryKept: boolean | null }
  | { kind: "resumeFailed"; error: string }
  | { kind: "retryDue" }
  | { kind: "snapshotStored"; id: string; digest: string }
  | { kind: "appendAcked"; ticket: number }
  | { kind: "appendFailed"; ticket: number; error: string }
  | { kind: "flushDue" }
  | { kind: "pieceArrived"; piece: DirectChunk; from: InstanceId }
  /** The inbound link from `from` closed. */
  | { kind: "peerGone"; from: InstanceId }
  /** The outbound link to `to` closed after carrying pieces. */
  | { kind: "linkBroke"; to: InstanceId }
  | { kind: "leaveRequested" }
  /** Stop at once (tests, a second signal). */
  | { kind: "closeRequested" };

/** One input, stamped with the host's clock (monotonic ms). */
export type HostInput = Inputs & { atMs: number };

/** An input before its stamp (what a port reports; its shell adds `atMs`). */
export type Unstamped = Inputs;

export type Host = {
  inst: InstanceState;
  ports: ClusterPorts;
  rules: DataPathRules;
  /** The latest input's time. */
  nowMs: number;
  /** Bumped whenever reading stops: reads of an older generation are ignored. */
  generation: number;
  /** This turn's observed events, for the next record. */
  outbox: Event[];
  /** Per request ended by a batched event: pieces sent direct before it. */
  outboxDirect: Record<RequestId, number> | undefined;
  /** Per request ended by a batched event: content deltas in those pieces. */
  outboxDeltas: Record<RequestId, number> | undefined;
  flushArmed: boolean;
  retryArmed: boolean;
  /** Records not yet acknowledged, in order: appended again after a hold. */
  unacked: { ticket: number; record: ClusterRecord }[];
  tickets: number;
  senders: Senders;
  receivers: Receivers;
  /** Where peers send this instance answer pieces (CLUSTER_ADVERTISE_URL). */
  peerUrl: string | undefined;
  /**
   * A finished leave whose clients still wait for pieces of ends the log gave
   * (found by the simulator: a client with its whole stream was ended 503
   * because its end marker was still on the link): its endLocal and `left`
   * wait until the receivers let go (they end short after endWaitMs at most).
   */
  finishing: { error: ClientError; closeCode: number; left: boolean } | null;
  /** Inputs that came while one was being handled: taken in order after it. */
  queue: HostInput[];
  busy: boolean;
  closed: boolean;
};

export function makeHost(
  inst: InstanceState,
  ports: ClusterPorts,
  rules: DataPathRules = DATA_PATH_RULES,
): Host {
  return {
    inst,
    ports,
    rules,
    nowMs: 0,
    generation: 0,
    outbox: [],
    outboxDirect: undefined,
    outboxDeltas: undefined,
    flushArmed: false,
    retryArmed: false,
    unacked: [],
    tickets: 0,
    senders: new Map(),
    receivers: new Map(),
    peerUrl: undefined,
    finishing: null,
    queue: [],
    busy: false,
    closed: false,
  };
}

/**
 * Handles one input and carries out all it leads to. An input given while
 * another is being handled (a port reporting at once) waits its turn: the
 * instance sees one input at a time, in arrival order.
 */
export function stepHost(h: Host, input: HostInput): void {
  if (h.closed) return;
  h.queue.push(input);
  if (h.busy) return;
  h.busy = true;
  try {
    for (
      let next = h.queue.shift();
      next !== undefined;
      next = h.queue.shift()
    ) {
      if (next.atMs > h.nowMs) h.nowMs = next.atMs;
      handle(h, next);
      if (h.finishing !== null && !endsWaiting(h)) finishLeave(h);
    }
  } finally {
    h.busy = false;
  }
}

function handle(h: Host, i: HostInput): void {
  switch (i.kind) {
    case "observed":
      return observed(h, i.event);
    case "joinRead":
      return feed(h, {
        kind: "joinRead",
        epoch: i.epoch,
        snapshot: i.snapshot,
      });
    case "joinFailed":
      return feed(h, {
        kind: "joinFailed",
        error: i.error,
        refused: i.refused,
      });
    case "entryRead":
      if (i.generation === h.generation) readEntry(h, i.entry);
      return;
    case "caughtUp":
      if (i.generation === h.generation) feed(h, { kind: "caughtUp" });
      return;
    case "readFailed":
      if (i.generation !== h.generation) return;
      return feed(h, { kind: "readFailed", error: i.error, atMs: i.atMs });
    case "logLost":
      if (i.generation !== undefined && i.generation !== h.generation) return;
      return feed(h, {
        kind: "logLost",
        reason: i.reason,
        reset: i.reset,
        atMs: i.atMs,
      });
    case "resumeRead":
      return feed(h, {
        kind: "resumeRead",
        epoch: i.epoch,
        lastEntryKept: i.lastEntryKept,
        atMs: i.atMs,
      });
    case "resumeFailed":
      return feed(h, { kind: "resumeFailed", error: i.error, atMs: i.atMs });
    case "retryDue":
      h.retryArmed = false;
      return feed(h, { kind: "retryDue" });
    case "snapshotStored":
      return feed(h, { kind: "snapshotStored", id: i.id, digest: i.digest });
    case "appendAcked": {
      const n = h.unacked.findIndex((u) => u.ticket === i.ticket);
      if (n >= 0) h.unacked.splice(n, 1);
      return;
    }
    case "appendFailed":
      return feed(h, {
        kind: "logLost",
        reason: `append failed: ${i.error}`,
        reset: false,
        atMs: i.atMs,
      });
    case "flushDue":
      return flush(h);
    case "pieceArrived":
      return carry(
        h,
        h.rules.pieceArrived(h.receivers, i.piece, i.from, h.nowMs),
      );
    case "peerGone":
      return carry(h, h.rules.peerGone(h.receivers, i.from));
    case "linkBroke":
      return cutLink(h, i.to);
    case "leaveRequested":
      return feed(h, { kind: "leaveRequested" });
    case "closeRequested":
      flush(h);
      feed(h, { kind: "closeRequested" });
      h.closed = true;
      return;
    default:
      return assertNever(i);
  }
}

/** An event this instance observed: to the log, or answered here (instance.ts `route`). */
function observed(h: Host, event: Event): void {
  if (event.kind === "shutdownRequested") {
    return feed(h, { kind: "leaveRequested" });
  }
  if (event.kind === "tick") dataPathTick(h);
  const r = route(h.inst, event);
  switch (r.kind) {
    case "append":
      return fromWorker(h, event);
    case "refuse":
      return exec(h, r.effect);
    case "drop":
      return;
    default:
      return assertNever(r);
  }
}

function feed(h: Host, input: InstanceInput): void {
  let actions: InstanceAction[];
  try {
    actions = stepInstance(h.inst, input);
  } catch (e) {
    h.ports.fact({ kind: "inputFailed", input: input.kind, error: String(e) });
    return;
  }
  for (const a of actions) carryOut(h, a);
}

/** The data path reads an entry's record first (its ends' piece counts). */
function readEntry(h: Host, entry: LogEntry): void {
  let record: ClusterRecord | undefined;
  try {
    record = decodeRecord(entry.data);
  } catch {
    record = undefined; // the core reports it unreadable
  }
  if (record?.kind === "events" && record.direct !== undefined) {
    for (const [requestId, n] of Object.entries(record.direct)) {
      h.rules.expectPieces(h.receivers, requestId, n);
    }
  }
  feed(h, { kind: "entryRead", entry, ...(record ? { record } : {}) });
}

function carryOut(h: Host, a: InstanceAction): void {
  const { ports } = h;
  switch (a.kind) {
    case "effects":
      ports.fact({ kind: "applied", effects: a.effects, died: a.died });
      for (const effect of a.effects) {
        if (!dataPathEffect(h, effect)) runIfHeld(h, effect, a.quiet);
      }
      return;
    case "note":
      return ports.fact({ kind: "note", note: a.note, mine: a.mine });
    case "append":
      if (a.record.kind !== "events") flush(h);
      return appendRecord(h, a.record);
    case "putSnapshot":
      return ports.putSnapshot(a.snapshot, a.trimBeforeId, a.digest);
    case "endLocal":
      if (h.inst.phase === "gone" && endsWaiting(h)) {
        h.finishing = { error: a.error, closeCode: a.closeCode, left: false };
        return;
      }
      return endLocal(h, a.error, a.closeCode);
    case "observe":
      for (const e of a.events) observed(h, e);
      return;
    case "join":
      return ports.join();
    case "read":
      return ports.read(++h.generation);
    case "resume":
      return ports.resume(h.inst.position === "0" ? null : h.inst.position);
    case "refuseUnadmitted":
      return refuseUnadmitted(h);
    case "resend":
      // Appended again, a record says how far this replica is now.
      for (const u of [...h.unacked]) {
        u.record.appliedMs = h.inst.appliedMs;
        ports.append(u.record, u.ticket);
      }
      return flush(h);
    case "stopReading":
      h.generation++;
      return;
    case "armRetry":
      if (h.retryArmed) return;
      h.retryArmed = true;
      return ports.arm("retry", a.ms);
    case "rejoined":
      return ports.fact({ kind: "rejoined", fresh: a.fresh });
    case "left":
      if (h.finishing !== null) return void (h.finishing.left = true);
      return ports.fact({ kind: "left" });
    case "log":
      return ports.log(a.level, a.message, a.fields);
    default:
      return assertNever(a);
  }
}

function runIfHeld(h: Host, effect: Effect, quiet: boolean): void {
  if (holds(h, ownerOf(effect), quiet)) exec(h, effect);
}

/** Whether this instance carries out an effect owned by `owner` (ownership.ts). */
function holds(h: Host, owner: EffectOwner, quiet: boolean): boolean {
  const { holds: held } = h.ports;
  switch (owner.kind) {
    case "workerSocket":
      return held.worker(owner.workerId) ||
        (owner.handshake && held.handshake(owner.workerId));
    case "client":
      return held.client(owner.requestId);
    case "requestOrigin":
      // Skipping the others' keeps this instance's metrics to its own traffic.
      return isOrigin(h.inst.cluster, h.inst.id, owner.requestId);
    case "caller":
    case "every":
      return true; // the effect runner finds the caller here, or not
    case "logLine":
      return !quiet && logsOn(h.inst.cluster, h.inst.id, owner.fields);
    default:
      return assertNever(owner);
  }
}

function exec(h: Host, effect: Effect): void {
  try {
    h.ports.run(effect);
  } catch (e) {
    h.ports.log("error", "effect failed", {
      effect: effect.kind,
      error: String(e),
    });
  }
}

// ---- the outbox ----------------------------------------------------------------

/** Kept until acknowledged; sent now unless the log is held. */
function appendRecord(h: Host, record: ClusterRecord): void {
  const ticket = ++h.tickets;
  h.unacked.push({ ticket, record });
  if (appending(h.inst)) h.ports.append(record, ticket);
}

/** Into the next record, which leaves at the end of this turn (flushDue). */
function batch(h: Host, event: Event): void {
  h.outbox.push(event);
  if (!h.flushArmed) {
    h.flushArmed = true;
    h.ports.arm("flush", 0);
  }
}

function flush(h: Host): void {
  h.flushArmed = false;
  if (h.outbox.length === 0 || !recording(h.inst)) return;
  const events = h.outbox;
  const direct = h.outboxDirect;
  const deltas = h.outboxDeltas;
  h.outbox = [];
  h.outboxDirect = undefined;
  h.outboxDeltas = undefined;
  const record = eventsRecord(h.inst, events);
  if (record.kind === "events") {
    if (h.peerUrl !== undefined) record.peer = h.peerUrl;
    if (direct !== undefined) record.direct = direct;
    if (deltas !== undefined) record.deltas = deltas;
  }
  appendRecord(h, record);
}

/** Appends a shell-level fact (API keys); throws while the log is not taking records. */
export function appendNote(h: Host, note: ClusterNote): void {
  const phase = h.inst.phase;
  if (phase !== "serving" && phase !== "leaving") {
    throw new Error("the relay cluster is unavailable");
  }
  flush(h);
  appendRecord(h, noteRecord(h.inst, note));
}

/**
 * Requests sent to the log but not yet admitted are new work: answered 503
 * now, and withdrawn in the log (should their admission have landed, the
 * fleet cancels them right after it).
 */
function refuseUnadmitted(h: Host): void {
  const core = h.inst.cluster.core;
  for (const requestId of [...h.ports.holds.clients()]) {
    // Admitted: in the replica, or ended there with its end waiting here for
    // pieces still on the link (found by the simulator: a whole stream got
    // this 503 when its instance's log blinked).
    if (core.requests.has(requestId) || h.receivers.has(requestId)) continue;
    exec(h, { kind: "respondError", requestId, error: UNAVAILABLE });
    batch(h, { kind: "clientDisconnected", atMs: core.nowMs, requestId });
  }
}

/**
 * Ends this instance's clients, closes its worker sockets and answers every
 * worker handshake still waiting for the log (they reconnect via the
 * balancer): an attempt whose answer was lost with the log would otherwise
 * hold its worker forever (issue 23). A stream whose whole answer reached its
 * client (the sender's marked last piece arrived) ends cleanly, with its usage
 * record from what this instance knows: its log end may never come, and an
 * error after a complete answer makes a client run it again (issue 33 item 4).
 */
function endLocal(h: Host, error: ClientError, closeCode: number): void {
  const { holds: held } = h.ports;
  const whole: Effect[] = [];
  for (const requestId of [...held.clients()]) {
    const done = h.rules.completedStream(h.receivers, requestId);
    if (done !== null) {
      exec(h, { kind: "endStream", requestId, error: null });
      whole.push(...finishedHere(h, done.request, done.end));
      continue;
    }
    exec(
      h,
      held.clientStarted(requestId)
        ? { kind: "endStream", requestId, error }
        : { kind: "respondError", requestId, error },
    );
  }
  for (const effect of whole) exec(h, effect);
  resetDataPath(h);
  h.unacked.length = 0;
  // What this instance observed and had not sent yet is held too: it must
  // not reach the log under its next id (found by the simulator: a
  // completion of the old incarnation was appended after its rejoin).
  h.outbox = [];
  h.outboxDirect = undefined;
  h.outboxDeltas = undefined;
  for (const workerId of [...held.workers()]) {
    exec(h, {
      kind: "closeWorker",
      workerId,
      code: closeCode,
      reason: error.message,
    });
  }
  for (const workerId of [...held.handshakes()]) {
    exec(h, {
      kind: "rejectWorker",
      workerId,
      code: 1013,
      reason: error.message,
    });
  }
}

/** Whether a client here waits for pieces before an end the log already gave. */
function endsWaiting(h: Host): boolean {
  for (const r of h.receivers.values()) if (r.tail.length > 0) return true;
  return false;
}

/** The leave's deferred end: what is held ends, and the shell shuts down. */
function finishLeave(h: Host): void {
  const f = h.finishing!;
  h.finishing = null;
  endLocal(h, f.error, f.closeCode);
  if (f.left) h.ports.fact({ kind: "left" });
}

/**
 * The usage record of a stream completed outside the log, written by the
 * core's own `finish` over a scratch state: the same record, counted by the
 * same rules, charged to nothing the fleet shares.
 */
function finishedHere(h: Host, request: Request, end: StreamEnd): Effect[] {
  // Log time: the replica's, unless it was just reset (0); never before the
  // last the request itself saw, so the record's durations are not negative.
  const s = request.status;
  const seen = s.kind === "streaming"
    ? s.lastChunkAtMs
    : s.kind === "queued"
    ? request.arrivedAtMs
    : s.dispatchedAtMs;
  const nowMs = Math.max(h.inst.cluster.core.nowMs, seen, request.arrivedAtMs);
  const scratch = initialState(h.inst.config, nowMs);
  // A copy: the request may still be the replica's (an instance declared
  // gone keeps its replica), and `finish` writes to it.
  const r: Request = { ...request };
  if (r.deltas !== null && end.deltas !== null) r.deltas = end.deltas;
  const out: Effect[] = [];
  finish(scratch, r, "completed", 200, out, null, end.tokenCounts);
  return out.filter((e) => e.kind === "requestFinished");
}

// ---- the direct data path (data_path.ts) --------------------------------------

/**
 * An event from a worker socket held here: a chunk the data path carries is
 * taken; an answer's end is logged without the body that went direct, with
 * how many pieces (and content deltas) went before it.
 */
function fromWorker(h: Host, event: Event): void {
  const cs = h.inst.cluster;
  if (event.kind !== "chunkReceived") {
    const rid = "requestId" in event ? event.requestId : null;
    const end = h.rules.routeEnd(
      h.senders,
      cs.core,
      rid === null ? undefined : cs.requestOwner.get(rid),
      event,
    );
    if (end.cut && event.kind === "completeReceived") {
      cut(h, event.requestId, event.workerId, "too_large", end.deltas);
    }
    for (const piece of end.last?.pieces ?? []) {
      deliver(h, end.last!.to, piece);
    }
    if (end.pieces !== null && rid !== null) {
      (h.outboxDirect ??= {})[rid] = end.pieces;
      if (end.deltas !== null) (h.outboxDeltas ??= {})[rid] = end.deltas;
    }
    return batch(h, end.event);
  }
  const owner = cs.requestOwner.get(event.requestId);
  const routed = h.rules.routeChunk(h.senders, cs.core, owner, event);
  switch (routed.kind) {
    case "log":
      return batch(h, event);
    case "drop":
      return;
    case "cut":
      return cut(
        h,
        routed.requestId,
        routed.workerId,
        routed.reason,
        sentDeltas(h.senders, routed.requestId, routed.workerId),
      );
    case "direct":
      if (routed.commit !== null) batch(h, routed.commit);
      return deliver(h, routed.to, routed.piece);
    default:
      return assertNever(routed);
  }
}

/** Appends a `cut` record after the events queued before it. */
function cut(
  h: Host,
  requestId: RequestId,
  workerId: WorkerId,
  reason: CutReason,
  deltas: number | null,
): void {
  flush(h);
  if (!recording(h.inst)) return;
  const record = cutRecord(h.inst, requestId, workerId, reason);
  if (record.kind === "cut" && deltas !== null) record.deltas = deltas;
  appendRecord(h, record);
}

/** A piece leaves for instance `to`: a call when that is this one, else its link. */
function deliver(h: Host, to: InstanceId, piece: DirectChunk): void {
  if (to === h.inst.id) {
    return carry(h, h.rules.pieceArrived(h.receivers, piece, to, h.nowMs));
  }
  const url = h.inst.cluster.instances.get(to)?.peerUrl;
  // Nowhere to send it: the answer is cut like one whose link broke.
  if (url === undefined) return cutLink(h, to);
  h.ports.sendPiece(to, url, piece);
}

/** Every answer being sent to `to` may have lost pieces: each is cut. */
function cutLink(h: Host, to: InstanceId): void {
  for (const x of h.rules.linkBroke(h.senders, to)) {
    cut(h, x.requestId, x.workerId, "link_lost", x.deltas);
  }
}

/** Receiver actions: a piece written to its client, or a client effect run. */
function carry(h: Host, actions: readonly ReceiverAction[]): void {
  for (const a of actions) {
    exec(
      h,
      a.kind === "write"
        ? { kind: "writeChunk", requestId: a.requestId, chunk: a.chunk }
        : a.effect,
    );
  }
}

/**
 * An effect of the replica the data path takes: a client effect for a client
 * held here (in log order with its pieces); true when taken. A dispatch whose
 * client is here opens the receiver; an ended request closes it.
 */
function dataPathEffect(h: Host, effect: Effect): boolean {
  const { holds: held } = h.ports;
  if (effect.kind === "sendToWorker") {
    const m = effect.message;
    if (m.type === "request" && held.client(m.request_id)) {
      carry(
        h,
        h.rules.dispatched(
          h.receivers,
          m.request_id,
          effect.workerId,
          h.nowMs,
          h.inst.cluster.core.requests.get(m.request_id) ?? null,
          h.inst.cluster.workerOwner.get(effect.workerId) ?? null,
        ),
      );
    }
    return false;
  }
  if (effect.kind === "requestFinished") {
    // The log ended the request without a word to its client (its instance
    // was declared gone while frozen, found by the simulator): a client that
    // has its whole stream ends cleanly, not with the error endLocal gives.
    const rid = effect.requestId;
    if (
      h.rules.completedStream(h.receivers, rid) !== null && held.client(rid)
    ) {
      exec(h, { kind: "endStream", requestId: rid, error: null });
    }
    requestEnded(h.receivers, rid);
    return false;
  }
  if (
    (effect.kind === "startStream" || effect.kind === "writeChunk" ||
      effect.kind === "endStream" || effect.kind === "respond" ||
      effect.kind === "respondError") && held.client(effect.requestId)
  ) {
    carry(h, logEffect(h.receivers, effect, h.nowMs));
    return true;
  }
  return false;
}

/** Time passed: the sender forgets ended answers; the receiver's timers fire. */
function dataPathTick(h: Host): void {
  const core = h.inst.cluster.core;
  forgetSent(h.senders, core);
  const due = h.rules.receiverDue(
    h.receivers,
    h.nowMs,
    core.config.requestTimeoutMs,
    DATA_PATH_DEFAULTS.endWaitMs,
  );
  for (const s of due.idle) cut(h, s.requestId, s.workerId, "idle", null);
  carry(h, due.actions);
}

/**
 * This instance ended or handed off everything it held: forget it all. (A
 * client kept past this would meet its effects again when the rebuilt
 * replica replays the log: the simulator found a stream started twice.)
 */
function resetDataPath(h: Host): void {
  h.senders.clear();
  h.receivers.clear();
  h.ports.closeLinks();
}
