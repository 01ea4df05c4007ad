// One instance's replica of the fleet's core state (issue 16). Every instance
// applies the same records in the same order, so every replica makes the same
// decisions; an instance then carries out only the effects for sockets it holds.
// This module adds only what sharing needs on top of `reduce`: which instance
// owns each worker socket and each client, exactly-once application of retried
// appends, and instance liveness measured in log time.
import type { Effect } from "../effect.ts";
import type { Event, RequestId, WorkerId } from "../events/event.ts";
import { reduce } from "../reduce.ts";
import { initialState, type State } from "../state/state.ts";
import type { Config } from "../config.ts";
import type { ClusterRecord, InstanceId } from "./record.ts";
import { applyCut, idleKeptByClients } from "./stream_cut.ts";

export type Liveness = {
  /** An instance with no record for this long (log time) is dead. */
  deadAfterMs: number;
  /** An instance whose records show it this far behind the log is dead (stuck reader). */
  lagMaxMs: number;
  /**
   * A gap this long between consecutive records means the log itself was down
   * (every live instance ticks far more often): nobody is blamed for it.
   */
  logGapMs: number;
};

export const DEFAULT_LIVENESS: Liveness = {
  deadAfterMs: 4_000,
  lagMaxMs: 3_000,
  logGapMs: 2_000,
};

export type InstanceView = {
  /** Log time of its last record. */
  lastSeenMs: number;
  /** Highest sequence number applied. */
  seq: number;
  /** Where it takes answer pieces from peers (issue 23); absent until it says. */
  peerUrl?: string;
};

export type ClusterState = {
  core: State;
  liveness: Liveness;
  instances: Map<InstanceId, InstanceView>;
  /** Instances declared dead; their later records are ignored. */
  dead: Set<InstanceId>;
  /** Which instance holds each worker socket and each client connection. */
  workerOwner: Map<WorkerId, InstanceId>;
  requestOwner: Map<RequestId, InstanceId>;
  /** Log time of the last applied record. */
  lastMs: number;
  /**
   * Recent stretches of log time without any entry (the log itself stalled),
   * oldest first: time an instance could not have read anything in is not
   * counted as its lag.
   */
  quiet: { fromMs: number; toMs: number }[];
};

/** Every live instance ticks every 250 ms: a longer silence is the log's. */
const QUIET_MS = 500;

export type Applied = {
  effects: Effect[];
  /** Instances declared dead by this record (the shell resets itself if it is one). */
  died: InstanceId[];
  /** The record's note, when it was a live note record. */
  note: Record<string, string | number | null> | null;
};

export function initialClusterState(
  config: Config,
  liveness: Liveness = DEFAULT_LIVENESS,
  core: State = initialState(config, 0),
): ClusterState {
  return {
    core,
    liveness,
    instances: new Map(),
    dead: new Set(),
    workerOwner: new Map(),
    requestOwner: new Map(),
    lastMs: 0,
    quiet: [],
  };
}

const NOTHING: Applied = Object.freeze({ effects: [], died: [], note: null });

/**
 * Applies one log record at log time `atMs`. The record's events are reduced
 * with `atMs` as their time (every replica must see the same time), mutating
 * the events in place: the caller owns the decoded record.
 */
export function applyRecord(
  cs: ClusterState,
  record: ClusterRecord,
  atMs: number,
): Applied {
  if (cs.dead.has(record.instance)) return NOTHING;
  const out: Effect[] = [];
  const died: InstanceId[] = [];
  const previousMs = cs.lastMs;
  // The log was unreachable for a while: no instance could append, so the
  // silence proves nothing about any of them.
  if (cs.lastMs > 0 && atMs - cs.lastMs > cs.liveness.logGapMs) {
    for (const view of cs.instances.values()) view.lastSeenMs = atMs;
  }
  if (cs.lastMs > 0 && atMs - cs.lastMs > QUIET_MS) {
    cs.quiet.push({ fromMs: cs.lastMs, toMs: atMs });
    while (
      cs.quiet.length > 0 &&
      cs.quiet[0]!.toMs < atMs - 2 * cs.liveness.lagMaxMs - QUIET_MS
    ) cs.quiet.shift();
  }
  if (atMs > cs.lastMs) cs.lastMs = atMs;
  const view = cs.instances.get(record.instance);
  if (view !== undefined && record.seq <= view.seq) return NOTHING; // a retried append
  if (view === undefined) {
    cs.instances.set(record.instance, { lastSeenMs: atMs, seq: record.seq });
  } else {
    view.seq = record.seq;
    view.lastSeenMs = atMs;
  }
  // How far behind the log the instance was when it appended: the records it
  // had not applied yet. Its own append's time does not count, so an instance
  // that caught up with a quiet log is not blamed for the quiet.
  if (
    record.appliedMs !== null &&
    lagOf(cs, record.appliedMs, previousMs) > cs.liveness.lagMaxMs
  ) {
    instanceDied(cs, record.instance, "fell behind the log", atMs, out, died);
    return { effects: out, died, note: null };
  }
  switch (record.kind) {
    case "left":
      if (cs.instances.has(record.who) || record.who === record.instance) {
        instanceDied(cs, record.who, "left", atMs, out, died);
      } else cs.dead.add(record.who);
      return { effects: out, died, note: null };
    case "note":
      return { effects: out, died, note: record.note };
    case "cut":
      if (record.deltas !== undefined) {
        addDeltas(cs, record.requestId, record.deltas);
      }
      applyCut(cs.core, record.requestId, record.workerId, record.reason, out);
      return { effects: out, died, note: null };
    case "events":
      if (record.peer !== undefined) {
        cs.instances.get(record.instance)!.peerUrl = record.peer;
      }
      for (const [requestId, n] of Object.entries(record.deltas ?? {})) {
        addDeltas(cs, requestId, n);
      }
      for (const e of record.events) {
        applyEvent(cs, record.instance, e, atMs, out, died);
      }
      return { effects: out, died, note: null };
  }
}

/**
 * The content deltas of an answer's pieces that went direct (issue 33): the
 * replica's count, as if those chunks had been applied here.
 */
function addDeltas(cs: ClusterState, requestId: string, n: number): void {
  const r = cs.core.requests.get(requestId);
  if (r !== undefined && r.deltas !== null) r.deltas += n;
}

function applyEvent(
  cs: ClusterState,
  instance: InstanceId,
  e: Event,
  atMs: number,
  out: Effect[],
  died: InstanceId[],
): void {
  e.atMs = atMs;
  if (e.kind === "workerConnectAttempted") {
    cs.workerOwner.set(e.workerId, instance);
  } else if (e.kind === "requestReceived") {
    cs.requestOwner.set(e.requestId, instance);
  } else if (e.kind === "tick") {
    forgetEnded(cs);
    idleKeptByClients(cs.core, atMs);
    for (const [id, v] of cs.instances) {
      if (atMs - v.lastSeenMs > cs.liveness.deadAfterMs) {
        instanceDied(cs, id, "stopped ticking", atMs, out, died);
      }
    }
  }
  for (const effect of reduce(cs.core, e).effects) out.push(effect);
}

/**
 * The single-instance paths, taken at one log position by every replica: the
 * dead instance's clients are gone (their requests are cancelled on their
 * workers, C18/C44), then its worker sockets are gone (requeue before the first
 * byte keeping the deadline, SSE error after: C22, C24). Queued requests stay
 * queued: every replica holds them.
 */
function instanceDied(
  cs: ClusterState,
  id: InstanceId,
  why: string,
  atMs: number,
  out: Effect[],
  died: InstanceId[],
): void {
  cs.dead.add(id);
  cs.instances.delete(id);
  died.push(id);
  out.push({
    kind: "log",
    level: "warn",
    message: "cluster instance is gone",
    fields: { instance: id, reason: why },
  });
  for (const [requestId, owner] of cs.requestOwner) {
    if (owner !== id) continue;
    cs.requestOwner.delete(requestId);
    const event: Event = { kind: "clientDisconnected", atMs, requestId };
    for (const effect of reduce(cs.core, event).effects) out.push(effect);
  }
  for (const [workerId, owner] of cs.workerOwner) {
    if (owner !== id) continue;
    cs.workerOwner.delete(workerId);
    const event: Event = {
      kind: "workerDisconnected",
      atMs,
      workerId,
      reason: `its relay instance ${id} is gone`,
    };
    for (const effect of reduce(cs.core, event).effects) out.push(effect);
  }
}

/** Ownership of ended requests and departed workers, dropped on ticks (linear in live ones). */
function forgetEnded(cs: ClusterState): void {
  for (const id of cs.requestOwner.keys()) {
    if (!cs.core.requests.has(id)) cs.requestOwner.delete(id);
  }
  for (const id of cs.workerOwner.keys()) {
    if (!cs.core.workers.has(id) && !cs.core.pending.has(id)) {
      cs.workerOwner.delete(id);
    }
  }
}

/** Log time between `appliedMs` and `untilMs` in which entries existed that the instance had not applied. */
function lagOf(cs: ClusterState, appliedMs: number, untilMs: number): number {
  let lag = untilMs - appliedMs;
  for (const q of cs.quiet) {
    const from = Math.max(q.fromMs, appliedMs);
    const to = Math.min(q.toMs, untilMs);
    if (to > from) lag -= to - from;
  }
  return lag;
}

/** Whether `id` is a live member (its records are applied). */
export function isLive(cs: ClusterState, id: InstanceId): boolean {
  return cs.instances.has(id);
}
