// The cluster instance's I/O (issue 23): what Redis, sockets and timers report
// becomes an input of core/cluster/instance.ts, and each action it returns is
// carried out here. Nothing is decided here: which effect this instance runs
// is core/cluster/ownership.ts, when to snapshot, rejoin or leave is the core's.
import { setImmediate } from "node:timers";
import type { ClientError, Effect, Event } from "../../../core/mod.ts";
import {
  type ClusterRecord,
  configDigest,
  decodeRecord,
  encodeRecord,
  REDUCER_VERSION,
} from "../../../core/cluster/mod.ts";
import {
  appending,
  cutRecord,
  eventsRecord,
  type InstanceAction,
  type InstanceInput,
  type InstanceState,
  type Note,
  noteRecord,
  recording,
  route,
  stepInstance,
  UNAVAILABLE,
} from "../../../core/cluster/instance.ts";
import {
  type EffectOwner,
  isOrigin,
  logsOn,
  ownerOf,
} from "../../../core/cluster/ownership.ts";
import { assertNever } from "../../../core/assert_never.ts";
import { type Driver, makeDriver } from "../../../core/driver.ts";
// @ts-types="npm:@types/ws@8.18.1"
import type { WebSocket } from "ws";
import type { Config, State } from "../../../core/mod.ts";
import type { Liveness } from "../../../core/cluster/mod.ts";
import type { Logger } from "../../log.ts";
import type { Clients } from "../http/clients.ts";
import type { ClusterEngine, LogEntry } from "./engine.ts";
import { type DirectPath, makeDirectPath } from "./direct.ts";
import { type PeerLinks, startPeerLinks } from "./peer_link.ts";

export type ClusterDeps = {
  engine: ClusterEngine;
  /** The server's state object: replaced in place on join and reset. */
  state: State;
  coreConfig: Config;
  clients: Clients;
  sockets: Map<string, WebSocket>;
  /** A worker handshake held here and not yet answered (authenticated at upgrade, issue 15). */
  workerPending?: (workerId: string) => boolean;
  /** Every handshake held here and not yet answered. */
  workersPending?: () => string[];
  runEffect: (effect: Effect) => void;
  log: Logger;
  liveness?: Liveness;
  /** How often (log time) the lowest live instance snapshots and trims the log. */
  snapshotEveryMs?: number;
  /** The secret of the links between instances (CLUSTER_SECRET); absent: one kept in the engine. */
  clusterSecret?: string;
  /** How long the log may be unreachable before this instance gives up what it holds (CLUSTER_LOG_LOST_MS). */
  logLostMs?: number;
};

export class ClusterJoinError extends Error {
  override name = "ClusterJoinError";
}

export type InstanceIo = {
  d: ClusterDeps;
  inst: InstanceState;
  driver: Driver<InstanceInput>;
  /** Bumped whenever reading stops: a read loop of an older generation ends. */
  generation: number;
  /** Resolves true once a catch-up read reached the log's end. */
  caughtUp: Promise<boolean>;
  lastError: unknown;
  outbox: Event[];
  /** Per request ended by a batched event: pieces sent direct before it. */
  outboxDirect: Record<string, number> | undefined;
  flushScheduled: boolean;
  /** Records not yet acknowledged, in order: appended again after a hold. */
  unacked: ClusterRecord[];
  /** Appends under way: closing waits for them. */
  appends: Set<Promise<void>>;
  /** The direct data path (issue 23): answer pieces between instances. */
  direct: DirectPath;
  links: PeerLinks;
  /** Where peers send this instance answer pieces (CLUSTER_ADVERTISE_URL). */
  peerUrl: string | undefined;
  peerSecret: string;
  retryTimer: ReturnType<typeof setTimeout> | undefined;
  closed: boolean;
  noteListeners: ((note: Note, mine: boolean) => void)[];
  rejoinListeners: ((fresh: boolean) => void)[];
};

/** Joins the log for the first time; throws (the server exits) when it cannot. */
export async function firstJoin(
  d: ClusterDeps,
  inst: InstanceState,
): Promise<InstanceIo> {
  const io: InstanceIo = {
    d,
    inst,
    driver: makeDriver<InstanceState, InstanceInput, InstanceAction>({
      state: inst,
      step: stepInstance,
      run: (action) => carryOut(io, action),
      // A broken invariant is our bug: report it loudly, keep serving others.
      onStepError: (e, input) =>
        d.log("error", "core rejected a cluster input", {
          input: input.kind,
          error: String(e),
        }),
    }),
    generation: 0,
    caughtUp: Promise.resolve(false),
    lastError: null,
    outbox: [],
    outboxDirect: undefined,
    flushScheduled: false,
    unacked: [],
    appends: new Set(),
    direct: undefined as unknown as DirectPath,
    links: undefined as unknown as PeerLinks,
    peerUrl: undefined,
    peerSecret: d.clusterSecret ?? "",
    retryTimer: undefined,
    closed: false,
    noteListeners: [],
    rejoinListeners: [],
  };
  startDataPath(io);
  d.engine.onStatus((s, loss) => {
    if (s !== "down") return;
    input(io, {
      kind: "logLost",
      reason: loss?.detail ?? "engine connection closed",
      reset: loss?.kind === "reset",
      atMs: performance.now(),
    });
  });
  try {
    input(io, await readJoin(io));
    if (!(await io.caughtUp)) throw io.lastError;
  } catch (e) {
    io.closed = true;
    clearTimeout(io.retryTimer);
    io.links.close();
    throw e;
  }
  return io;
}

/** The peer links and the data path's shell (direct.ts), wired to this instance. */
function startDataPath(io: InstanceIo): void {
  io.links = startPeerLinks({
    secret: () => io.peerSecret,
    self: () => io.inst.id,
    onPiece: (piece, from) => io.direct.pieceFrom(piece, from),
    onPeerGone: (from) => io.direct.peerGone(from),
    onLinkBroke: (to) => io.direct.linkBroke(to),
    log: io.d.log,
  });
  io.direct = makeDirectPath({
    cs: io.inst.cluster,
    self: () => io.inst.id,
    holdsClient: (id) => io.d.clients.has(id),
    run: (effect) => runIfHeld(io, effect, false),
    log: (event) => batch(io, event),
    cut: (requestId, workerId, reason) => {
      flush(io);
      if (!recording(io.inst)) return;
      appendRecord(io, cutRecord(io.inst, requestId, workerId, reason));
    },
    links: io.links,
    now: () => performance.now(),
  });
}

function input(io: InstanceIo, i: InstanceInput): void {
  if (!io.closed) io.driver.submit(i);
}

/** The version gate (a log reset also resets it), then the epoch and snapshot. */
async function readJoin(io: InstanceIo): Promise<InstanceInput> {
  const { engine, coreConfig } = io.d;
  const meta = JSON.stringify({
    reducer: REDUCER_VERSION,
    config: configDigest(coreConfig),
  });
  const stored = await engine.setIfAbsent("meta", meta);
  if (stored !== meta) {
    throw new ClusterJoinError(
      `this instance cannot join the cluster: its reducer version or core settings (${meta}) differ from the cluster's (${stored}); give every instance the same build and settings, or start the new build on a fresh CLUSTER_PREFIX (see README "Scaling out")`,
    );
  }
  if (io.d.clusterSecret === undefined) {
    io.peerSecret = await engine.setIfAbsent(
      "peer-secret",
      crypto.randomUUID(),
    );
  }
  const epoch = await engine.epoch();
  const snapshot = await engine.getSnapshot();
  return { kind: "joinRead", epoch, snapshot };
}

function carryOut(io: InstanceIo, action: InstanceAction): void {
  const { d } = io;
  switch (action.kind) {
    case "effects":
      for (const effect of action.effects) {
        if (!io.direct.onEffect(effect)) runIfHeld(io, effect, action.quiet);
      }
      return;
    case "note":
      for (const l of io.noteListeners) l(action.note, action.mine);
      return;
    case "append":
      if (action.record.kind !== "events") flush(io);
      return appendRecord(io, action.record);
    case "putSnapshot":
      return putSnapshot(io, action);
    case "endLocal":
      return endLocal(io, action.error, action.closeCode);
    case "observe":
      for (const e of action.events) submitObserved(io, e);
      return;
    case "join":
      readJoin(io).then((i) => input(io, i)).catch((e) =>
        input(io, {
          kind: "joinFailed",
          error: String(e),
          refused: e instanceof ClusterJoinError,
        })
      );
      return;
    case "read":
      io.caughtUp = follow(io, ++io.generation);
      return;
    case "resume":
      return readResume(io);
    case "refuseUnadmitted":
      return refuseUnadmitted(io);
    case "resend":
      for (const record of [...io.unacked]) {
        sendRecord(io, record, io.inst.appliedMs);
      }
      return flush(io);
    case "stopReading":
      io.generation++;
      return;
    case "armRetry":
      return armRetry(io, action.ms);
    case "rejoined":
      for (const l of io.rejoinListeners) l(action.fresh);
      return;
    case "left":
      return d.runEffect({ kind: "shutdownComplete" });
    case "log":
      return d.log(action.level, action.message, action.fields);
    default:
      return assertNever(action);
  }
}

function runIfHeld(io: InstanceIo, effect: Effect, quiet: boolean): void {
  if (holds(io, ownerOf(effect), quiet)) exec(io, effect);
}

/** Whether this instance carries out an effect owned by `owner` (ownership.ts). */
function holds(io: InstanceIo, owner: EffectOwner, quiet: boolean): boolean {
  const { d, inst } = io;
  switch (owner.kind) {
    case "workerSocket":
      return d.sockets.has(owner.workerId) ||
        (owner.handshake && d.workerPending?.(owner.workerId) === true);
    case "client":
      return d.clients.has(owner.requestId);
    case "requestOrigin":
      // Skipping the others' keeps this instance's metrics to its own traffic.
      return isOrigin(inst.cluster, inst.id, owner.requestId);
    case "caller":
    case "every":
      return true; // the effect runner finds the caller here, or not
    case "logLine":
      return !quiet && logsOn(inst.cluster, inst.id, owner.fields);
    default:
      return assertNever(owner);
  }
}

function exec(io: InstanceIo, effect: Effect): void {
  try {
    io.d.runEffect(effect);
  } catch (e) {
    io.d.log("error", "effect failed", {
      effect: effect.kind,
      error: String(e),
    });
  }
}

/** Kept until acknowledged; sent now unless the log is held. */
function appendRecord(io: InstanceIo, record: ClusterRecord): void {
  io.unacked.push(record);
  if (appending(io.inst)) sendRecord(io, record, record.appliedMs);
}

/** Appended again after a hold, a record says how far this replica is now. */
function sendRecord(
  io: InstanceIo,
  record: ClusterRecord,
  applied: number | null,
): void {
  record.appliedMs = applied;
  const p = io.d.engine.append(encodeRecord(record)).then(() => {
    const i = io.unacked.indexOf(record);
    if (i >= 0) io.unacked.splice(i, 1);
  }, (e) =>
    input(io, {
      kind: "logLost",
      reason: `append failed: ${e}`,
      reset: false,
      atMs: performance.now(),
    }));
  io.appends.add(p);
  p.finally(() => io.appends.delete(p));
}

/** While holding: is the log back, and may this instance resume? */
function readResume(io: InstanceIo): void {
  const { engine } = io.d;
  const last = io.inst.position;
  // Is the last entry applied here still in the log? A trim or a failover to
  // a lagging replica removed it, or everything after it is there to catch up
  // on. (Asked with holds(), not a read after a made-up id: the engine takes a
  // read's id as this instance's position for its own tail check.)
  const kept = last === "0" ? Promise.resolve(null) : engine.holds(last);
  Promise.all([engine.epoch(), kept]).then(
    ([epoch, lastEntryKept]) =>
      input(io, {
        kind: "resumeRead",
        epoch,
        lastEntryKept,
        atMs: performance.now(),
      }),
    (e) =>
      input(io, {
        kind: "resumeFailed",
        error: String(e),
        atMs: performance.now(),
      }),
  );
}

/**
 * Requests sent to the log but not yet admitted are new work: answered 503
 * now, and withdrawn in the log (should their admission have landed, the
 * fleet cancels them right after it).
 */
function refuseUnadmitted(io: InstanceIo): void {
  const { d, inst } = io;
  for (const requestId of [...d.clients.keys()]) {
    if (inst.cluster.core.requests.has(requestId)) continue;
    exec(io, { kind: "respondError", requestId, error: UNAVAILABLE });
    batch(io, {
      kind: "clientDisconnected",
      atMs: inst.cluster.core.nowMs,
      requestId,
    });
  }
}

function putSnapshot(
  io: InstanceIo,
  a: Extract<InstanceAction, { kind: "putSnapshot" }>,
): void {
  io.d.engine.putSnapshot(a.snapshot, a.trimBeforeId).then(() =>
    input(io, { kind: "snapshotStored", id: a.snapshot.id, digest: a.digest })
  ).catch((e) =>
    io.d.log("warn", "cluster snapshot failed", { error: String(e) })
  );
}

/**
 * Ends this instance's clients, closes its worker sockets and answers every
 * worker handshake still waiting for the log (they reconnect via the
 * balancer): an attempt whose answer was lost with the log would otherwise
 * hold its worker forever (issue 23).
 */
function endLocal(io: InstanceIo, error: ClientError, closeCode: number): void {
  const { d } = io;
  io.direct.reset();
  io.unacked.length = 0;
  for (const [requestId, c] of [...d.clients]) {
    exec(
      io,
      c.res.headersSent
        ? { kind: "endStream", requestId, error }
        : { kind: "respondError", requestId, error },
    );
  }
  for (const workerId of [...d.sockets.keys()]) {
    exec(io, {
      kind: "closeWorker",
      workerId,
      code: closeCode,
      reason: error.message,
    });
  }
  for (const workerId of d.workersPending?.() ?? []) {
    exec(io, {
      kind: "rejectWorker",
      workerId,
      code: 1013,
      reason: error.message,
    });
  }
}

/** Catches up on the log (quietly), reports caughtUp, then tails it. */
async function follow(io: InstanceIo, gen: number): Promise<boolean> {
  const { engine } = io.d;
  try {
    for (;;) {
      const batch = await engine.read(io.inst.position, 0, 5000);
      if (gen !== io.generation) return false;
      if (batch.length === 0) break;
      for (const entry of batch) readEntry(io, entry);
    }
  } catch (e) {
    io.lastError = e;
    if (gen === io.generation) {
      input(io, {
        kind: "readFailed",
        error: String(e),
        atMs: performance.now(),
      });
    }
    return false;
  }
  input(io, { kind: "caughtUp" });
  void tail(io, gen);
  return true;
}

async function tail(io: InstanceIo, gen: number): Promise<void> {
  while (!io.closed && gen === io.generation) {
    let batch;
    try {
      batch = await io.d.engine.read(io.inst.position, 1000, 1000);
    } catch (e) {
      if (gen === io.generation) {
        input(io, {
          kind: "logLost",
          reason: `read failed: ${e}`,
          reset: false,
          atMs: performance.now(),
        });
      }
      return;
    }
    for (const entry of batch) {
      if (gen !== io.generation) return;
      readEntry(io, entry);
    }
  }
}

/** The data path reads an entry's record first (its ends' piece counts). */
function readEntry(io: InstanceIo, entry: LogEntry): void {
  let record: ClusterRecord | undefined;
  try {
    record = decodeRecord(entry.data);
    io.direct.beforeRecord(record);
  } catch {
    record = undefined; // the core reports it unreadable
  }
  input(io, { kind: "entryRead", entry, ...(record ? { record } : {}) });
}

function armRetry(io: InstanceIo, ms: number): void {
  if (io.closed || io.retryTimer !== undefined) return;
  io.retryTimer = setTimeout(() => {
    io.retryTimer = undefined;
    input(io, { kind: "retryDue" });
  }, ms);
}

/** An event this instance observed: to the log, or answered here (instance.ts `route`). */
export function submitObserved(io: InstanceIo, event: Event): void {
  if (event.kind === "shutdownRequested") {
    return input(io, { kind: "leaveRequested" });
  }
  if (event.kind === "tick") io.direct.tick();
  const r = route(io.inst, event);
  switch (r.kind) {
    case "append": {
      const routed = io.direct.routeWorkerEvent(event);
      if (routed.taken) return;
      if (routed.pieces !== null && "requestId" in event) {
        (io.outboxDirect ??= {})[String(event.requestId)] = routed.pieces;
      }
      return batch(io, routed.event);
    }
    case "refuse":
      return exec(io, r.effect);
    case "drop":
      return;
    default:
      return assertNever(r);
  }
}

/** Into the next record, which leaves at the end of this turn. */
function batch(io: InstanceIo, event: Event): void {
  io.outbox.push(event);
  if (!io.flushScheduled) {
    io.flushScheduled = true;
    setImmediate(() => flush(io));
  }
}

function flush(io: InstanceIo): void {
  io.flushScheduled = false;
  if (io.outbox.length === 0 || !recording(io.inst)) return;
  const events = io.outbox;
  const ends = io.outboxDirect;
  io.outbox = [];
  io.outboxDirect = undefined;
  appendRecord(io, {
    ...eventsRecord(io.inst, events),
    ...(io.peerUrl === undefined ? {} : { peer: io.peerUrl }),
    ...(ends === undefined ? {} : { direct: ends }),
  } as ClusterRecord);
}

export function appendNote(io: InstanceIo, note: Note): void {
  const phase = io.inst.phase;
  if (phase !== "serving" && phase !== "leaving") {
    throw new Error("the relay cluster is unavailable");
  }
  flush(io);
  appendRecord(io, noteRecord(io.inst, note));
}

/** Stops at once: a serving instance says it left; pending appends finish first. */
export async function closeInstance(io: InstanceIo): Promise<void> {
  if (io.closed) return;
  flush(io);
  input(io, { kind: "closeRequested" });
  await Promise.allSettled([...io.appends]);
  io.closed = true;
  clearTimeout(io.retryTimer);
  io.links.close();
  await io.d.engine.close();
}
