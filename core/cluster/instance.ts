// One relay instance's life in a cluster (issue 23), pure: joining the shared
// log, replaying it, serving, losing it, rejoining, leaving. Its one driver is
// the host (host.ts), which the shell (shell/server/cluster/) and the cluster
// simulator (sim/cluster/world.ts) both run: it feeds what their Redis (or
// virtual log), sockets and timers reported, and carries out the returned
// actions in order. Every rule that was
// in the shell's closure lives here: who snapshots and when, the checkpoint
// digests, the rejoin and its retry, the leave and its deadline.
import { assertNever } from "../assert_never.ts";
import type { Config } from "../config.ts";
import type { ClientError, Effect } from "../effect.ts";
import type { Event } from "../events/event.ts";
import {
  apiError,
  shuttingDown as shuttingDownError,
} from "../protocol/errors.ts";
import { initialState } from "../state/state.ts";
import {
  type ClusterRecord,
  type CutReason,
  decodeRecord,
  type InstanceId,
} from "./record.ts";
import { LOG_HOLD_DEFAULTS, resumeAfterHold } from "./log_hold.ts";
import { type ClusterNote, decodeNote, encodeNote } from "./note.ts";
import {
  applyRecord,
  type ClusterState,
  initialClusterState,
} from "./replica.ts";
import {
  decodeSnapshot,
  digestOf,
  encodeSnapshot,
  stateDigest,
} from "./snapshot.ts";

export type InstancePhase =
  /** Reading the log's epoch and snapshot (first start, or a retry). */
  | "joining"
  /** Catching up on the log before serving: quiet, appends nothing. */
  | "replaying"
  | "serving"
  /**
   * The log stopped answering: new work is refused, what this instance holds
   * (replica, sockets, streams on the direct path, records not yet appended)
   * is kept until the log answers again or CLUSTER_LOG_LOST_MS passes.
   */
  | "holding"
  /** The log answers again: catching up before appending what was held. */
  | "resuming"
  /** The log was lost (or this replica diverged): refuse, rejoin. */
  | "logDown"
  /** Draining its own sockets before it leaves the log. */
  | "leaving"
  | "gone";

/** The checkpoint and rejoin rules, as data (cluster configuration). */
export type InstanceRules = {
  /** Log time between checkpoints; the lowest live instance snapshots at each. */
  snapshotEveryMs: number;
  /** Checkpoint digests kept to compare with the snapshot writer's notes. */
  checkpointsKept: number;
  /** Wall time between rejoin attempts while the log is unreachable. */
  rejoinRetryMs: number;
  /** CLUSTER_LOG_LOST_MS: how long a hold may last before what is held ends. */
  lostAfterMs: number;
};

export const DEFAULT_INSTANCE_RULES: InstanceRules = {
  snapshotEveryMs: 5_000,
  checkpointsKept: 4,
  rejoinRetryMs: 500,
  lostAfterMs: LOG_HOLD_DEFAULTS.lostAfterMs,
};

/** One log entry: its id (`ms-seq`), its server time in ms, its payload. */
export type LogEntry = { id: string; ms: number; data: string };
export type Snapshot = { id: string; epoch: string; data: string };
export type { ClusterNote as Note } from "./note.ts";

export type InstanceState = {
  phase: InstancePhase;
  rules: InstanceRules;
  config: Config;
  /** Ids are `<base>.<incarnation>`: a new incarnation is a new member. */
  base: string;
  incarnation: number;
  id: InstanceId;
  /** Records appended under `id`; a retried append is applied once by it. */
  seq: number;
  /** The log's epoch this replica follows; "" before the first join. */
  epoch: string;
  /** Id of the last entry applied; "0" for none. */
  position: string;
  appliedMs: number | null;
  /** The replica; its `core` object is kept (the shell's views hold it). */
  cluster: ClusterState;
  /** Entry id -> this replica's digest there, for the last few checkpoints. */
  checkpoints: Map<string, string>;
  /** The previous snapshot this instance wrote: the log is trimmed up to it. */
  previousSnapshotId: string | null;
  /** What the join under way found: whether to retire the old id. */
  joining: { former: InstanceId | null; fresh: boolean } | null;
  /** Log time by which a leaving instance leaves, drained or not. */
  leaveDeadlineMs: number | null;
  /**
   * Seq of the note a leaving instance appends when it begins to leave; until
   * it reads it back, events it observed before may still be on their way to
   * the log, and what it holds is not all in its replica yet.
   */
  leaveMarkSeq: number | null;
  leaveMarkRead: boolean;
  /** Shell time (monotonic ms) the current hold began; null when not holding. */
  heldSinceMs: number | null;
};

export type InstanceInput =
  /** The shell read the log's epoch and its snapshot (the version gate passed). */
  | { kind: "joinRead"; epoch: string; snapshot: Snapshot | null }
  /** `record`: the entry already decoded by the shell (its data path reads it first). */
  | { kind: "entryRead"; entry: LogEntry; record?: ClusterRecord }
  /** A catch-up read returned nothing more: the replica is at the log's end. */
  | { kind: "caughtUp" }
  | { kind: "joinFailed"; error: string; refused: boolean }
  /** A catch-up read failed (joining or resuming). `atMs`: shell monotonic time. */
  | { kind: "readFailed"; error: string; atMs: number }
  /**
   * The log stopped answering (`reset`: it answers, but is not the log this
   * replica applied: a new epoch, or a failover that lost its tail).
   */
  | { kind: "logLost"; reason: string; reset: boolean; atMs: number }
  /** While holding: what the log says now. */
  | {
    kind: "resumeRead";
    epoch: string;
    /** Whether the log still holds this replica's last entry (null: it applied none). */
    lastEntryKept: boolean | null;
    atMs: number;
  }
  | { kind: "resumeFailed"; error: string; atMs: number }
  | { kind: "retryDue" }
  | { kind: "snapshotStored"; id: string; digest: string }
  | { kind: "leaveRequested" }
  /** Stop at once (tests, a second signal): a serving instance says it left. */
  | { kind: "closeRequested" };

export type InstanceAction =
  /** The replica's effects, for the shell's ownership filter (ownership.ts). */
  /**
   * The replica's effects, for the host's ownership filter (ownership.ts),
   * and the instances the entry declared gone (a typed fact, issue 34).
   */
  | {
    kind: "effects";
    effects: readonly Effect[];
    quiet: boolean;
    died: readonly InstanceId[];
  }
  | { kind: "note"; note: ClusterNote; mine: boolean }
  | { kind: "append"; record: ClusterRecord }
  /** Store the snapshot, trim the log before `trimBeforeId`, then report snapshotStored. */
  | {
    kind: "putSnapshot";
    snapshot: Snapshot;
    trimBeforeId: string | null;
    digest: string;
  }
  /** End every client, close every worker socket, refuse every pending handshake held here. */
  | { kind: "endLocal"; error: ClientError; closeCode: number }
  /** Observed events to route as if the instance saw them (a leave drains its workers). */
  | { kind: "observe"; events: Event[] }
  /** Read the epoch and snapshot, then report joinRead (or joinFailed). */
  | { kind: "join" }
  /** Read the epoch and this replica's last entry back, then report resumeRead (or resumeFailed). */
  | { kind: "resume" }
  /** Answer 503 to this instance's requests not yet admitted, and withdraw them in the log. */
  | { kind: "refuseUnadmitted" }
  /** Append again, in order, the records not acknowledged, then what was batched. */
  | { kind: "resend" }
  /** Catch up (caughtUp when done), then tail the log; a new read generation. */
  | { kind: "read" }
  /** Stop reading: entries of the old generation are not applied. */
  | { kind: "stopReading" }
  | { kind: "armRetry"; ms: number }
  | { kind: "rejoined"; fresh: boolean }
  /** The leave is complete: the shell finishes its shutdown. */
  | { kind: "left" }
  | {
    kind: "log";
    level: "debug" | "info" | "warn" | "error";
    message: string;
    fields: Record<string, string | number>;
  };

/** What an observed event becomes, by phase. */
export type Routing =
  | { kind: "append" }
  | { kind: "refuse"; effect: Effect }
  | { kind: "drop" };

export const UNAVAILABLE: ClientError = apiError("cluster_unavailable");

const RESET: ClientError = apiError("cluster_instance_reset");

export function initialInstance(
  config: Config,
  cluster: ClusterState,
  base: string,
  rules: InstanceRules = DEFAULT_INSTANCE_RULES,
): InstanceState {
  return {
    phase: "joining",
    rules,
    config,
    base,
    incarnation: 0,
    id: `${base}.0`,
    seq: 0,
    epoch: "",
    position: "0",
    appliedMs: null,
    cluster,
    checkpoints: new Map(),
    previousSnapshotId: null,
    joining: null,
    leaveDeadlineMs: null,
    leaveMarkSeq: null,
    leaveMarkRead: false,
    heldSinceMs: null,
  };
}

/**
 * Stream ids are `ms-seq`: compared as numbers, never as strings. Read in
 * place, without splitting: replicas and log readers compare ids per entry
 * (the cluster simulator's profile had a split-based version at 64% of its
 * time, bench/README.md).
 */
export function compareIds(a: string, b: string): number {
  const ad = a.indexOf("-");
  const bd = b.indexOf("-");
  const am = idPart(a, 0, ad < 0 ? a.length : ad);
  const bm = idPart(b, 0, bd < 0 ? b.length : bd);
  if (am !== bm) return am - bm;
  const as = ad < 0 ? 0 : idPart(a, ad + 1, a.length);
  const bs = bd < 0 ? 0 : idPart(b, bd + 1, b.length);
  return as - bs;
}

/** The decimal number in `s` from `from` to `to` (an empty part is 0). */
function idPart(s: string, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i++) n = n * 10 + (s.charCodeAt(i) - 48);
  return n;
}

export function stepInstance(
  s: InstanceState,
  input: InstanceInput,
): InstanceAction[] {
  switch (input.kind) {
    case "joinRead":
      return onJoinRead(s, input.epoch, input.snapshot);
    case "entryRead":
      return onEntry(s, input.entry, input.record);
    case "caughtUp":
      return onCaughtUp(s);
    case "joinFailed":
      return onJoinFailed(s, input.error, input.refused);
    case "readFailed":
      if (s.phase === "resuming") {
        s.phase = "holding";
        return onResumeFailed(s, input.error, input.atMs);
      }
      return onJoinFailed(s, input.error, false);
    case "logLost":
      return onLogLost(s, input);
    case "resumeRead":
      return onResumeRead(s, input);
    case "resumeFailed":
      return s.phase === "holding"
        ? onResumeFailed(s, input.error, input.atMs)
        : [];
    case "retryDue":
      if (s.phase === "holding") return [{ kind: "resume" }];
      if (s.phase !== "logDown") return [];
      s.phase = "joining";
      return [{ kind: "join" }];
    case "snapshotStored":
      if (s.phase !== "serving" && s.phase !== "leaving") return [];
      s.previousSnapshotId = input.id;
      return [{
        kind: "append",
        record: noteRecord(s, {
          t: "digest",
          id: input.id,
          digest: input.digest,
        }),
      }];
    case "leaveRequested":
      return onLeaveRequested(s);
    case "closeRequested": {
      const out: InstanceAction[] = [{ kind: "stopReading" }];
      if (s.phase === "serving") out.unshift(leftRecord(s, s.id));
      s.phase = "gone";
      return out;
    }
    default:
      return assertNever(input);
  }
}

/** Whether observed events go to the log, or are answered here and now. */
export function route(s: InstanceState, event: Event): Routing {
  switch (s.phase) {
    case "serving":
      return { kind: "append" };
    case "leaving":
      return stoppingRefusal(s, event) ?? { kind: "append" };
    case "gone":
      return stoppingRefusal(s, event) ?? { kind: "drop" };
    case "holding":
    case "resuming":
      // What in-flight work reports is kept for the log; new work is refused.
      if (
        event.kind !== "requestReceived" &&
        event.kind !== "workerConnectAttempted" && event.kind !== "tick"
      ) return { kind: "append" };
    // falls through
    case "joining":
    case "replaying":
    case "logDown":
      if (event.kind === "requestReceived") {
        return refuse(event.requestId, UNAVAILABLE);
      }
      if (event.kind === "workerConnectAttempted") {
        // A pending handshake: only rejectWorker answers it (issue 23).
        return reject(
          event.workerId,
          1013,
          "relay cluster unavailable: try again later",
        );
      }
      return { kind: "drop" };
  }
}

/**
 * New work on an instance that is leaving or gone: a request gets the core's
 * shutdown answer, a worker 1012 (this instance restarts; its retry lands on
 * another); null for anything else.
 */
function stoppingRefusal(s: InstanceState, event: Event): Routing | null {
  if (event.kind === "requestReceived") {
    return refuse(event.requestId, shuttingDown(s.config));
  }
  if (event.kind === "workerConnectAttempted") {
    return reject(event.workerId, 1012, "relay instance shutting down");
  }
  return null;
}

function refuse(requestId: string, error: ClientError): Routing {
  return { kind: "refuse", effect: { kind: "respondError", requestId, error } };
}

function reject(workerId: string, code: number, reason: string): Routing {
  return {
    kind: "refuse",
    effect: { kind: "rejectWorker", workerId, code, reason },
  };
}

/** The core's own refusal while shutting down (on_request_received.ts). */
function shuttingDown(config: Config): ClientError {
  return shuttingDownError(config);
}

/**
 * What every record of this instance carries: its id, its next sequence number
 * (a retried append is applied once) and the log time it last applied.
 */
function stamp(
  s: InstanceState,
): { instance: InstanceId; seq: number; appliedMs: number | null } {
  return { instance: s.id, seq: ++s.seq, appliedMs: s.appliedMs };
}

/** The record for one turn's observed events (null when there are none). */
export function eventsRecord(
  s: InstanceState,
  events: Event[],
): ClusterRecord {
  return {
    kind: "events",
    ...stamp(s),
    events,
  };
}

/** An answer the data path ended outside the log (core/cluster/stream_cut.ts). */
export function cutRecord(
  s: InstanceState,
  requestId: string,
  workerId: string,
  reason: CutReason,
): ClusterRecord {
  return {
    kind: "cut",
    ...stamp(s),
    requestId,
    workerId,
    reason,
  };
}

/** Whether records go to the log now (else they are kept until it answers). */
export function appending(s: InstanceState): boolean {
  return s.phase === "serving" || s.phase === "leaving";
}

/** Whether observed events still make records (appended now or kept for the log). */
export function recording(s: InstanceState): boolean {
  return appending(s) || s.phase === "holding" || s.phase === "resuming";
}

export function noteRecord(
  s: InstanceState,
  note: ClusterNote,
): ClusterRecord {
  return {
    kind: "note",
    ...stamp(s),
    note: encodeNote(note),
  };
}

function leftRecord(s: InstanceState, who: InstanceId): InstanceAction {
  return {
    kind: "append",
    record: {
      kind: "left",
      ...stamp(s),
      who,
    },
  };
}

function log(
  level: "debug" | "info" | "warn" | "error",
  message: string,
  fields: Record<string, string | number>,
): InstanceAction {
  return { kind: "log", level, message, fields };
}

/** The next incarnation: a new member of the fleet (the old id is written off). */
function renew(s: InstanceState): void {
  s.id = `${s.base}.${++s.incarnation}`;
  s.seq = 0;
}

/**
 * Drops the replica, keeping its objects (the shell's views hold them): the
 * events of an outage are lost for good, and an empty state answers /health
 * 503 so a balancer stops sending clients here.
 */
function resetReplica(s: InstanceState): void {
  const core = s.cluster.core;
  Object.assign(core, initialState(s.config, 0));
  Object.assign(
    s.cluster,
    initialClusterState(s.config, s.cluster.liveness, core),
  );
  s.position = "0";
  s.appliedMs = null;
}

function loadSnapshot(s: InstanceState, snap: Snapshot): void {
  const loaded = decodeSnapshot(snap.data);
  const core = s.cluster.core;
  Object.assign(core, loaded.core);
  loaded.core = core;
  Object.assign(s.cluster, loaded);
  s.position = snap.id;
  s.appliedMs = Number(snap.id.split("-")[0]);
}

function onJoinRead(
  s: InstanceState,
  epoch: string,
  snap: Snapshot | null,
): InstanceAction[] {
  if (s.phase !== "joining") return [];
  const fresh = epoch !== s.epoch;
  // A new log (first start, or the engine lost its data): start over.
  if (fresh || s.position === "0") resetReplica(s);
  if (
    snap !== null && snap.epoch === epoch &&
    compareIds(snap.id, s.position) > 0
  ) loadSnapshot(s, snap);
  s.epoch = epoch;
  // The next snapshot this instance writes trims the log only up to the one
  // joiners may be loading now: one it wrote before a failover (or under an
  // old epoch) may be past what the log still holds (found by the simulator:
  // a joiner replaying from the surviving snapshot lost its tail to the trim).
  s.previousSnapshotId = snap !== null && snap.epoch === epoch ? snap.id : null;
  const out: InstanceAction[] = [];
  const former = s.seq > 0 ? s.id : null;
  if (former !== null) {
    // Whatever this instance still holds belongs to the old id, which the
    // fleet has written off: its workers must register again (issue 23).
    out.push({ kind: "endLocal", error: RESET, closeCode: 1012 });
    renew(s);
  }
  s.joining = { former, fresh };
  s.phase = "replaying";
  // Catch up before appending anything: our records must not lag the log.
  out.push({ kind: "read" });
  return out;
}

function onCaughtUp(s: InstanceState): InstanceAction[] {
  if (s.phase === "resuming") {
    s.phase = "serving";
    s.heldSinceMs = null;
    return [
      log("info", "cluster log reachable again: resumed", { instance: s.id }),
      { kind: "resend" },
    ];
  }
  if (s.phase !== "replaying") return [];
  const { former, fresh } = s.joining ?? { former: null, fresh: true };
  s.joining = null;
  s.phase = "serving";
  const out: InstanceAction[] = [];
  if (former !== null && !fresh) out.push(leftRecord(s, former));
  out.push(log("info", "joined the relay cluster", {
    instance: s.id,
    position: s.position,
    instances: s.cluster.instances.size,
  }));
  if (former !== null) out.push({ kind: "rejoined", fresh });
  return out;
}

function onJoinFailed(
  s: InstanceState,
  error: string,
  refused: boolean,
): InstanceAction[] {
  if (s.phase !== "joining" && s.phase !== "replaying") return [];
  s.phase = "logDown";
  return [
    log(refused ? "error" : "debug", "cluster rejoin failed; retrying", {
      error,
    }),
    { kind: "armRetry", ms: s.rules.rejoinRetryMs },
  ];
}

function onLogLost(
  s: InstanceState,
  i: Extract<InstanceInput, { kind: "logLost" }>,
): InstanceAction[] {
  if (s.phase === "leaving") return finishLeave(s, false);
  if (s.phase === "holding" || s.phase === "resuming") {
    if (i.reset) return giveUp(s, i.reason);
    s.phase = "holding";
    return [{ kind: "stopReading" }, {
      kind: "armRetry",
      ms: s.rules.rejoinRetryMs,
    }];
  }
  if (
    s.phase === "replaying" || s.phase === "joining" || s.phase === "logDown"
  ) {
    if (!i.reset) return [];
    // The log this replica was catching up on is not the log now (found by
    // the simulator: a joiner replaying past a failover's lost tail kept
    // entries the fleet never saw, and diverged): start over from it.
    resetReplica(s);
    if (s.phase !== "replaying") return [];
    s.phase = "logDown";
    return [{ kind: "stopReading" }, {
      kind: "armRetry",
      ms: s.rules.rejoinRetryMs,
    }];
  }
  if (s.phase !== "serving") return [];
  const out: InstanceAction[] = [
    { kind: "stopReading" },
    log("error", "cluster log unreachable: refusing new requests", {
      reason: i.reason,
      instance: s.id,
      holding_ms: i.reset ? 0 : s.rules.lostAfterMs,
    }),
  ];
  // A log that is not the one applied here cannot be resumed: rejoin now.
  if (i.reset) return [...out, ...dropAndRetry(s, UNAVAILABLE)];
  s.phase = "holding";
  s.heldSinceMs = i.atMs;
  return [...out, { kind: "refuseUnadmitted" }, {
    kind: "armRetry",
    ms: s.rules.rejoinRetryMs,
  }];
}

/** Resume under the same id only when the tail after this replica is still whole. */
function onResumeRead(
  s: InstanceState,
  i: Extract<InstanceInput, { kind: "resumeRead" }>,
): InstanceAction[] {
  if (s.phase !== "holding") return [];
  const decision = resumeAfterHold({
    heldSinceMs: s.heldSinceMs ?? i.atMs,
    nowMs: i.atMs,
    lostAfterMs: s.rules.lostAfterMs,
    epochNow: i.epoch,
    epochMine: s.epoch,
    lastEntryKept: i.lastEntryKept,
  });
  if (decision.kind === "giveUp") return giveUp(s, decision.why);
  s.phase = "resuming";
  return [{ kind: "read" }];
}

function onResumeFailed(
  s: InstanceState,
  error: string,
  atMs: number,
): InstanceAction[] {
  if (atMs - (s.heldSinceMs ?? atMs) > s.rules.lostAfterMs) {
    return giveUp(s, `unreachable for ${s.rules.lostAfterMs} ms: ${error}`);
  }
  return [{ kind: "armRetry", ms: s.rules.rejoinRetryMs }];
}

/** The hold ends without the log: what this instance held ends, and it rejoins. */
function giveUp(s: InstanceState, why: string): InstanceAction[] {
  s.heldSinceMs = null;
  return [
    { kind: "stopReading" },
    log("error", "cluster log lost: ending what this instance held", {
      reason: why,
      instance: s.id,
    }),
    ...dropAndRetry(s, UNAVAILABLE),
  ];
}

/** Ends what this instance holds, drops the replica, and retries the join. */
function dropAndRetry(s: InstanceState, error: ClientError): InstanceAction[] {
  s.phase = "logDown";
  resetReplica(s);
  return [
    { kind: "endLocal", error, closeCode: 1012 },
    { kind: "armRetry", ms: s.rules.rejoinRetryMs },
  ];
}

/** Applies one entry and lists what this instance then does, in order. */
function onEntry(
  s: InstanceState,
  entry: LogEntry,
  decoded: ClusterRecord | undefined,
): InstanceAction[] {
  if (
    s.phase !== "replaying" && s.phase !== "serving" &&
    s.phase !== "leaving" && s.phase !== "resuming"
  ) return [];
  // Checkpoints fall on the first entry of each snapshot period: a position
  // every replica (and a joiner from a snapshot) picks the same way.
  const every = s.rules.snapshotEveryMs;
  const previousSlot = s.appliedMs === null
    ? null
    : Math.floor(s.appliedMs / every);
  s.position = entry.id;
  s.appliedMs = entry.ms;
  let record: ClusterRecord;
  try {
    record = decoded ?? decodeRecord(entry.data);
  } catch {
    return [log("error", "unreadable cluster log entry", { id: entry.id })];
  }
  const applied = applyRecord(s.cluster, record, entry.ms);
  const out: InstanceAction[] = [{
    kind: "effects",
    effects: applied.effects,
    quiet: s.phase === "replaying",
    died: applied.died,
  }];
  const note = applied.note === null ? null : decodeNote(applied.note);
  if (note !== null && note.t === "leaving") {
    if (record.instance === s.id && record.seq === s.leaveMarkSeq) {
      s.leaveMarkRead = true;
    }
  } else if (note !== null && note.t === "digest") {
    if (diverged(s, note)) return [...out, ...onDiverged(s, note)];
  } else if (note !== null) {
    out.push({ kind: "note", note, mine: record.instance === s.id });
  }
  if (applied.died.includes(s.id)) out.push(...selfDied(s));
  if (previousSlot !== Math.floor(entry.ms / every)) {
    out.push(...checkpoint(s, entry));
  }
  if (s.phase === "leaving") out.push(...leaveProgress(s));
  return out;
}

type DigestNote = Extract<ClusterNote, { t: "digest" }>;

function diverged(s: InstanceState, note: DigestNote): boolean {
  const mine = s.checkpoints.get(note.id);
  return mine !== undefined && mine !== note.digest && s.phase === "serving";
}

/**
 * A replica whose digest differs from the snapshot writer's has diverged (a
 * bug, or a core of another version): it rejoins from that snapshot.
 */
function onDiverged(s: InstanceState, note: DigestNote): InstanceAction[] {
  const out: InstanceAction[] = [
    { kind: "stopReading" },
    log("error", "this replica diverged from the cluster: rejoining", {
      instance: s.id,
      position: note.id,
      digest: s.checkpoints.get(note.id) ?? "",
      cluster_digest: note.digest,
    }),
  ];
  s.seq = Math.max(s.seq, 1); // rejoins under a new id, retiring this one
  return [...out, ...dropAndRetry(s, RESET)];
}

/** The fleet declared this instance dead (it froze or fell behind): a new id. */
function selfDied(s: InstanceState): InstanceAction[] {
  const old = s.id;
  renew(s);
  return [
    log("warn", "this instance was declared gone by the cluster; rejoining", {
      old_instance: old,
      instance: s.id,
    }),
    { kind: "endLocal", error: RESET, closeCode: 1012 },
  ];
}

/**
 * Every replica digests its state at each checkpoint; the lowest live
 * instance also stores it as the snapshot joiners load, trims the log behind
 * its previous snapshot, and (snapshotStored) announces its digest.
 */
function checkpoint(s: InstanceState, entry: LogEntry): InstanceAction[] {
  const writes = s.phase === "serving" && lowestLive(s.cluster) === s.id;
  // Only the writer needs the text; the others fold the digest as it is
  // written (stateDigest), which costs no copy of the state.
  const data = writes ? encodeSnapshot(s.cluster) : null;
  const digest = data === null ? stateDigest(s.cluster) : digestOf(data);
  s.checkpoints.set(entry.id, digest);
  while (s.checkpoints.size > s.rules.checkpointsKept) {
    s.checkpoints.delete(s.checkpoints.keys().next().value!);
  }
  if (data === null) return [];
  // Up to the last snapshot known stored: one whose write failed (Redis did
  // not answer) must not become the trim point (found by the simulator: a
  // failover then reverted to an older snapshot the log was trimmed past).
  const trimBeforeId = s.previousSnapshotId;
  return [{
    kind: "putSnapshot",
    snapshot: { id: entry.id, epoch: s.epoch, data },
    trimBeforeId,
    digest,
  }];
}

export function lowestLive(cs: ClusterState): InstanceId | null {
  let lowest: InstanceId | null = null;
  for (const id of cs.instances.keys()) {
    if (lowest === null || id < lowest) lowest = id;
  }
  return lowest;
}

/**
 * A graceful stop of one instance is not a fleet shutdown: its workers are
 * drained (they reconnect to another instance through the balancer), its
 * clients' requests finish, then it leaves the log. The core's drain timeout
 * is the deadline, counted in log time; new work meets the core's own
 * `shutting_down` refusal (route), as a single server's does.
 */
function onLeaveRequested(s: InstanceState): InstanceAction[] {
  if (s.phase === "leaving" || s.phase === "gone") return [];
  if (s.phase !== "serving") return finishLeave(s, false);
  s.phase = "leaving";
  s.leaveDeadlineMs = (s.appliedMs ?? 0) + s.config.drainTimeoutMs;
  // Appended after whatever this instance observed before (the shell flushes
  // its batch first): reading it back means its replica holds all of it.
  const mark = noteRecord(s, { t: "leaving" });
  s.leaveMarkSeq = mark.seq;
  s.leaveMarkRead = false;
  const drains: Event[] = ownWorkers(s).map((workerId) => ({
    kind: "workerDrainRequested",
    atMs: s.appliedMs ?? 0,
    workerId,
    reason: "relay instance stopping",
  }));
  return [
    log("info", "leaving the relay cluster", {
      instance: s.id,
      workers: drains.length,
      requests: ownRequests(s),
    }),
    { kind: "append", record: mark },
    ...(drains.length > 0
      ? [{ kind: "observe", events: drains } as const]
      : []),
  ];
}

function leaveProgress(s: InstanceState): InstanceAction[] {
  const drained = s.leaveMarkRead && ownWorkers(s).length === 0 &&
    ownPending(s) === 0 && ownRequests(s) === 0;
  const late = s.leaveDeadlineMs !== null && s.appliedMs !== null &&
    s.appliedMs >= s.leaveDeadlineMs;
  return drained || late ? finishLeave(s, true) : [];
}

function finishLeave(s: InstanceState, logUp: boolean): InstanceAction[] {
  const out: InstanceAction[] = [];
  if (logUp) out.push(leftRecord(s, s.id));
  s.phase = "gone";
  out.push(
    { kind: "stopReading" },
    {
      kind: "endLocal",
      error: shuttingDownError(s.config),
      closeCode: 1001,
    },
    { kind: "left" },
  );
  return out;
}

function ownWorkers(s: InstanceState): string[] {
  const out: string[] = [];
  for (const [workerId, owner] of s.cluster.workerOwner) {
    if (owner === s.id && s.cluster.core.workers.has(workerId)) {
      out.push(workerId);
    }
  }
  return out;
}

function ownPending(s: InstanceState): number {
  let n = 0;
  for (const [workerId, owner] of s.cluster.workerOwner) {
    if (owner === s.id && s.cluster.core.pending.has(workerId)) n++;
  }
  return n;
}

function ownRequests(s: InstanceState): number {
  let n = 0;
  for (const [requestId, owner] of s.cluster.requestOwner) {
    if (owner === s.id && s.cluster.core.requests.has(requestId)) n++;
  }
  return n;
}
