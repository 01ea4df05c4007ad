// The cluster runtime (issue 16): the same `Runtime` as runtime.ts, but `submit`
// appends to the shared log instead of reducing, and every log entry (from any
// instance) is applied to this instance's replica, whose effects then run here
// (through the one driver, ../../driver.ts, as in runtime.ts).
// Effects for sockets another instance holds find no socket and do nothing
// (run_effects.ts ignores unknown ids): that is the whole of effect ownership.
//
// Events of one event-loop turn go out in one entry (unbatched, the JavaScript
// client tops out near 19k appends/s; scale-out.md §1).
// @ts-types="npm:@types/ws@8.18.1"
import type { WebSocket } from "ws";
import { setImmediate } from "node:timers";
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { Buffer } from "node:buffer";
import {
  type ClientError,
  type Config,
  type Effect,
  type Event,
  initialState,
  type State,
} from "../../../core/mod.ts";
import {
  applyRecord,
  type ClusterRecord,
  type ClusterState,
  configDigest,
  decodeRecord,
  decodeSnapshot,
  DEFAULT_LIVENESS,
  digestOf,
  encodeRecord,
  encodeSnapshot,
  initialClusterState,
  type Liveness,
  LOG_HOLD_DEFAULTS,
  REDUCER_VERSION,
  resumeAfterHold,
} from "../../../core/cluster/mod.ts";
import { assertNever } from "../../../core/assert_never.ts";
import { makeDriver } from "../../driver.ts";
import type { Logger } from "../../log.ts";
import type { Clients } from "../http/clients.ts";
import type { Runtime } from "../runtime.ts";
import type { ClusterEngine, LogEntry } from "./engine.ts";
import { makeDirectPath } from "./direct.ts";
import { startPeerLinks } from "./peer_link.ts";

export class ClusterJoinError extends Error {
  override name = "ClusterJoinError";
}

export type Note = Record<string, string | number | null>;

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

export type ClusterRuntime = Runtime & {
  readonly engine: ClusterEngine;
  readonly instanceId: string;
  readonly cluster: ClusterState;
  readonly up: boolean;
  /** Appends a shell-level fact (API keys); every instance's `onNote` sees it in log order. */
  appendNote(note: Note): void;
  onNote(listener: (note: Note, mine: boolean) => void): void;
  /** Called after each rejoin; `fresh` when the log was new (Redis came back empty). */
  onRejoined(listener: (fresh: boolean) => void): void;
  /** Where peers send this instance answer pieces (CLUSTER_ADVERTISE_URL, issue 23). */
  advertise(url: string): void;
  /** The cluster secret in use (CLUSTER_SECRET or the generated one; "" before the first join). */
  peerSecret(): string;
  /** Takes an HTTP upgrade that is a peer link (issue 23); false for any other. */
  peerUpgrade: (
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
  ) => boolean;
  close(): Promise<void>;
};

const UNAVAILABLE: ClientError = {
  status: 503,
  code: "cluster_unavailable",
  message: "the relay cluster's shared log is unreachable; retry shortly",
  retryAfterSecs: 2,
};

/** One log entry to apply; `quiet` while catching up on a join (no log lines). */
type Applying = { entry: LogEntry; quiet: boolean };

/** What applying one entry asks of this instance, in this order. */
type EntryAction =
  | { kind: "effects"; effects: readonly Effect[]; quiet: boolean }
  | { kind: "checkDigest"; note: Note }
  | { kind: "note"; note: Note; from: string }
  | { kind: "deaths"; died: readonly string[] }
  | { kind: "checkpoint"; entry: LogEntry };

function newInstanceId(): string {
  return `i-${crypto.randomUUID().slice(0, 8)}`;
}

/** Stream ids are `ms-seq`: compared as numbers, never as strings. */
export function compareIds(a: string, b: string): number {
  const [am = 0, as = 0] = a.split("-").map(Number);
  const [bm = 0, bs = 0] = b.split("-").map(Number);
  return am !== bm ? am - bm : as - bs;
}

export async function startClusterRuntime(
  d: ClusterDeps,
): Promise<ClusterRuntime> {
  const { engine, state, log } = d;
  const meta = JSON.stringify({
    reducer: REDUCER_VERSION,
    config: configDigest(d.coreConfig),
  });
  /** The version gate, checked on every join: a log reset also resets it. */
  async function checkMeta(): Promise<void> {
    const stored = await engine.setIfAbsent("meta", meta);
    if (stored !== meta) {
      throw new ClusterJoinError(
        `this instance cannot join the cluster: its reducer version or core settings (${meta}) differ from the cluster's (${stored}); give every instance the same build and settings, or start the new build on a fresh CLUSTER_PREFIX (see README "Scaling out")`,
      );
    }
  }
  const cs = initialClusterState(
    d.coreConfig,
    d.liveness ?? DEFAULT_LIVENESS,
    state,
  );
  const snapshotEveryMs = d.snapshotEveryMs ?? 5_000;
  const logLostMs = d.logLostMs ?? LOG_HOLD_DEFAULTS.lostAfterMs;
  let resumeTimer: ReturnType<typeof setTimeout> | undefined;
  let instanceId = newInstanceId();
  let seq = 0;
  let epoch = "";
  let lastId = "0";
  let appliedMs: number | null = null;
  let up = false;
  let closed = false;
  /** Bumped on every loss and rejoin: a read loop of an older generation stops. */
  let generation = 0;
  let outbox: Event[] = [];
  let flushScheduled = false;
  let previousSnapshotId: string | null = null;
  /** Entry id -> this replica's digest there, for the last few checkpoints. */
  const checkpoints = new Map<string, string>();
  let retryTimer: ReturnType<typeof setTimeout> | undefined;
  /** Requests whose client is here: only these count in this instance's metrics. */
  const localRequests = new Set<string>();
  const noteListeners: ((note: Note, mine: boolean) => void)[] = [];
  const rejoinListeners: ((fresh: boolean) => void)[] = [];
  // Issue 23: the direct data path, and the log hold (core/cluster/log_hold.ts).
  let peerUrl: string | undefined;
  let peerSecret = d.clusterSecret ?? "";
  /** Per request ended by a queued event: pieces sent direct before it. */
  let outboxDirect: Record<string, number> | undefined;
  /** Records appended and not yet acknowledged, in order: appended again after a hold. */
  const unacked: ClusterRecord[] = [];
  /** Shell time the log became unreachable while this instance holds what it has; null when not. */
  let heldSince: number | null = null;
  const links = startPeerLinks({
    secret: () => peerSecret,
    self: () => instanceId,
    onPiece: (piece, from) => direct.pieceFrom(piece, from),
    onPeerGone: (from) => direct.peerGone(from),
    onLinkBroke: (to) => direct.linkBroke(to),
    log,
  });
  const direct = makeDirectPath({
    cs,
    self: () => instanceId,
    holdsClient: (id) => d.clients.has(id),
    run: (effect) => run(effect, false),
    log: (event) => queue(event),
    cut: (requestId, workerId, reason) => {
      flush();
      if (!up && heldSince === null) return;
      appendRecord({
        kind: "cut",
        instance: instanceId,
        seq: ++seq,
        appliedMs,
        requestId,
        workerId,
        reason,
      });
    },
    links,
    now: () => performance.now(),
  });

  /**
   * Every replica computes every log line; the instance holding the socket or
   * client a line is about writes it (fleet-wide lines, about neither, are
   * written everywhere).
   */
  function logsHere(fields: Record<string, string | number>): boolean {
    const w = fields.worker_id;
    const r = fields.request_id;
    if (w === undefined && r === undefined) return true;
    return (typeof w === "string" && cs.workerOwner.get(w) === instanceId) ||
      (typeof r === "string" && cs.requestOwner.get(r) === instanceId);
  }

  /** Whether `effect` concerns a socket or client this instance holds (or no socket). */
  function mine(effect: Effect): boolean {
    switch (effect.kind) {
      case "acceptWorker":
      case "rejectWorker":
        // The handshake waits for the core's answer before a socket exists.
        return d.sockets.has(effect.workerId) ||
          d.workerPending?.(effect.workerId) === true;
      case "sendToWorker":
      case "closeWorker":
        return d.sockets.has(effect.workerId);
      case "respond":
      case "respondError":
      case "startStream":
      case "writeChunk":
      case "endStream":
        return d.clients.has(effect.requestId);
      default:
        return true;
    }
  }

  function run(effect: Effect, quiet: boolean): void {
    // Effects for another instance's sockets are that instance's to carry out:
    // skipping them here keeps this instance's metrics tap to its own traffic.
    if (!mine(effect)) return;
    if (effect.kind === "requestFinished") {
      if (!localRequests.delete(effect.requestId)) return;
    } else if (
      effect.kind === "log" && (quiet || !logsHere(effect.fields))
    ) return;
    try {
      d.runEffect(effect);
    } catch (e) {
      log("error", "effect failed", { effect: effect.kind, error: String(e) });
    }
  }

  /**
   * Applying log entries goes through the same driver as the single server's
   * runtime: `stepEntry` applies one entry to the replica and lists what this
   * instance then does, in order; `carryOut` does it. Entries arrive from one
   * read loop at a time, so the driver's queue only guards re-entrancy.
   */
  const applier = makeDriver<ClusterState, Applying, EntryAction>({
    state: cs,
    step: stepEntry,
    run: carryOut,
    // A broken invariant is our bug: report it loudly, keep serving others.
    onStepError: (e, { entry }) =>
      log("error", "core rejected a log entry", {
        id: entry.id,
        error: String(e),
      }),
    // No `onActionError`: effects are guarded one by one in `run` (also used
    // outside the log), and a throwing note listener propagates, as before.
  });

  function applyEntry(entry: LogEntry, quiet: boolean): void {
    applier.submit({ entry, quiet });
  }

  function stepEntry(
    replica: ClusterState,
    { entry, quiet }: Applying,
  ): EntryAction[] {
    // Checkpoints fall on the first entry of each snapshot period: a position
    // every replica (and a joiner from a snapshot) picks the same way.
    const previousSlot = appliedMs === null
      ? null
      : Math.floor(appliedMs / snapshotEveryMs);
    lastId = entry.id;
    appliedMs = entry.ms;
    let record: ClusterRecord;
    try {
      record = decodeRecord(entry.data);
    } catch {
      log("error", "unreadable cluster log entry", { id: entry.id });
      return [];
    }
    direct.beforeRecord(record);
    const applied = applyRecord(replica, record, entry.ms);
    const actions: EntryAction[] = [
      { kind: "effects", effects: applied.effects, quiet },
    ];
    const note = applied.note;
    if (note !== null && note.t === "digest") {
      actions.push({ kind: "checkDigest", note });
    } else if (note !== null) {
      actions.push({ kind: "note", note, from: record.instance });
    }
    actions.push({ kind: "deaths", died: applied.died });
    if (previousSlot !== Math.floor(entry.ms / snapshotEveryMs)) {
      actions.push({ kind: "checkpoint", entry });
    }
    return actions;
  }

  function carryOut(action: EntryAction): void {
    switch (action.kind) {
      case "effects":
        for (const effect of action.effects) {
          if (!direct.onEffect(effect)) run(effect, action.quiet);
        }
        return;
      case "checkDigest":
        return checkDigest(action.note);
      case "note":
        for (const l of noteListeners) {
          l(action.note, action.from === instanceId);
        }
        return;
      case "deaths":
        if (action.died.includes(instanceId)) selfDied();
        return;
      case "checkpoint":
        return checkpoint(action.entry);
      default:
        return assertNever(action);
    }
  }

  /**
   * Every replica digests its state at each checkpoint; the lowest live
   * instance also stores it as the snapshot joiners load, trims the log behind
   * its previous snapshot, and announces its digest. A replica whose digest
   * differs has diverged (a bug, or a core of another version) and rejoins from
   * that snapshot.
   */
  function checkpoint(entry: LogEntry): void {
    const data = encodeSnapshot(cs);
    const digest = digestOf(data);
    checkpoints.set(entry.id, digest);
    if (checkpoints.size > 4) {
      checkpoints.delete(checkpoints.keys().next().value!);
    }
    if (!up) return;
    let lowest: string | null = null;
    for (const id of cs.instances.keys()) {
      if (lowest === null || id < lowest) lowest = id;
    }
    if (lowest !== instanceId) return;
    const trim = previousSnapshotId;
    previousSnapshotId = entry.id;
    engine.putSnapshot({ id: entry.id, epoch, data }, trim).then(() =>
      appendNote({ t: "digest", id: entry.id, digest })
    ).catch((e) =>
      log("warn", "cluster snapshot failed", { error: String(e) })
    );
  }

  function checkDigest(note: Note): void {
    const mine = checkpoints.get(String(note.id));
    if (mine === undefined || mine === note.digest || !up) return;
    log("error", "this replica diverged from the cluster: rejoining", {
      instance: instanceId,
      position: String(note.id),
      digest: mine,
      cluster_digest: String(note.digest),
    });
    up = false;
    generation++;
    outbox = [];
    endLocal({ ...UNAVAILABLE, code: "cluster_instance_reset" }, 1012);
    Object.assign(state, initialState(d.coreConfig, 0));
    resetCluster(initialClusterState(d.coreConfig, cs.liveness, state));
    lastId = "0";
    appliedMs = null;
    seq = Math.max(seq, 1); // rejoins under a new id, retiring this one
    scheduleRecover();
  }

  /**
   * Ends this instance's clients, closes its worker sockets and answers every
   * worker handshake still waiting for the log (they reconnect via the
   * balancer): an attempt whose answer was lost with the log would otherwise
   * hold its worker forever (issue 23).
   */
  function endLocal(error: ClientError, closeCode: number): void {
    direct.reset();
    unacked.length = 0;
    for (const [requestId, c] of [...d.clients]) {
      run(
        c.res.headersSent
          ? { kind: "endStream", requestId, error }
          : { kind: "respondError", requestId, error },
        false,
      );
    }
    localRequests.clear();
    for (const workerId of [...d.sockets.keys()]) {
      run(
        {
          kind: "closeWorker",
          workerId,
          code: closeCode,
          reason: error.message,
        },
        false,
      );
    }
    for (const workerId of d.workersPending?.() ?? []) {
      run({
        kind: "rejectWorker",
        workerId,
        code: 1013,
        reason: error.message,
      }, false);
    }
  }

  /** The fleet declared this instance dead (it froze or fell behind): rejoin under a new id. */
  function selfDied(): void {
    const old = instanceId;
    instanceId = newInstanceId();
    seq = 0;
    log("warn", "this instance was declared gone by the cluster; rejoining", {
      old_instance: old,
      instance: instanceId,
    });
    endLocal(
      {
        status: 503,
        code: "cluster_instance_reset",
        message: "the relay instance lost its cluster membership; retry",
        retryAfterSecs: 1,
      },
      1012,
    );
  }

  /**
   * The log stopped answering: new work is refused here, while what this
   * instance holds (replica, sockets, streams on the direct path, records not
   * yet appended) is kept until the log answers again (issue 23).
   */
  function lost(reason: string): void {
    if (!up || closed) return;
    up = false;
    generation++;
    heldSince = performance.now();
    log("error", "cluster log unreachable: refusing new requests", {
      reason,
      instance: instanceId,
      holding_ms: logLostMs,
    });
    refuseUnadmitted();
    scheduleResume();
  }

  /**
   * Requests sent to the log but not yet admitted are new work: answered 503
   * now, and withdrawn in the log (should their admission have landed, the
   * fleet cancels them right after it).
   */
  function refuseUnadmitted(): void {
    for (const requestId of [...d.clients.keys()]) {
      if (cs.core.requests.has(requestId)) continue;
      run({ kind: "respondError", requestId, error: UNAVAILABLE }, false);
      localRequests.delete(requestId);
      queue({ kind: "clientDisconnected", atMs: state.nowMs, requestId });
    }
  }

  function scheduleResume(): void {
    if (closed || resumeTimer !== undefined) return;
    resumeTimer = setTimeout(() => {
      resumeTimer = undefined;
      resume().catch((e) => {
        if (heldSince === null || closed) return;
        if (performance.now() - heldSince > logLostMs) {
          return giveUp(`unreachable for ${logLostMs} ms: ${e}`);
        }
        scheduleResume();
      });
    }, 500);
  }

  /** The log answers again: resume under the same id, or give up what is held. */
  async function resume(): Promise<void> {
    if (heldSince === null || closed) return;
    const current = await engine.epoch();
    const snap = await engine.getSnapshot();
    const decision = resumeAfterHold({
      heldSinceMs: heldSince,
      nowMs: performance.now(),
      lostAfterMs: logLostMs,
      epochNow: current,
      epochMine: epoch,
      snapshotMs: snap === null ? null : Number(snap.id.split("-")[0]),
      appliedMs,
      snapshotEveryMs,
    });
    if (decision.kind === "giveUp") return giveUp(decision.why);
    for (;;) {
      const batch = await engine.read(lastId, 0, 5000);
      if (batch.length === 0) break;
      for (const entry of batch) applyEntry(entry, false);
    }
    if (heldSince === null || closed) return;
    heldSince = null;
    up = true;
    const gen = ++generation;
    log("info", "cluster log reachable again: resumed", {
      instance: instanceId,
      records_held: unacked.length + (outbox.length > 0 ? 1 : 0),
    });
    for (const record of [...unacked]) sendRecord(record, appliedMs);
    flush();
    void readLoop(gen);
  }

  /** The hold ends without the log: what this instance held ends, and it rejoins. */
  function giveUp(why: string): void {
    heldSince = null;
    outbox = [];
    outboxDirect = undefined;
    log("error", "cluster log lost: ending what this instance held", {
      reason: why,
      instance: instanceId,
    });
    endLocal(UNAVAILABLE, 1012);
    // The replica is dropped, not kept: events of this outage are lost for
    // good, and an empty state makes /health answer 503 (no worker) so a
    // balancer's readiness check stops sending clients here. The rejoin loads
    // the snapshot and tails the log.
    Object.assign(state, initialState(d.coreConfig, 0));
    resetCluster(initialClusterState(d.coreConfig, cs.liveness, state));
    lastId = "0";
    appliedMs = null;
    scheduleRecover();
  }

  function scheduleRecover(): void {
    if (closed || retryTimer !== undefined) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      join().catch((e) => {
        const refused = e instanceof ClusterJoinError;
        log(refused ? "error" : "debug", "cluster rejoin failed; retrying", {
          error: String(e),
        });
        scheduleRecover();
      });
    }, 500);
  }

  /** Loads the snapshot when it is ahead of this replica (or the log is new), then catches up. */
  async function join(): Promise<void> {
    await checkMeta();
    if (d.clusterSecret === undefined) {
      peerSecret = await engine.setIfAbsent("peer-secret", crypto.randomUUID());
    }
    const current = await engine.epoch();
    const fresh = current !== epoch;
    const snap = await engine.getSnapshot();
    if (fresh || lastId === "0") {
      // A new log (first start, or the engine lost its data): start over.
      Object.assign(state, initialState(d.coreConfig, 0));
      resetCluster(initialClusterState(d.coreConfig, cs.liveness, state));
      lastId = "0";
      appliedMs = null;
    }
    if (
      snap !== null && snap.epoch === current &&
      compareIds(snap.id, lastId) > 0
    ) {
      const loaded = decodeSnapshot(snap.data);
      Object.assign(state, loaded.core);
      loaded.core = state;
      resetCluster(loaded);
      lastId = snap.id;
      appliedMs = Number(snap.id.split("-")[0]);
    }
    epoch = current;
    const old = up || seq > 0 ? instanceId : null;
    if (old !== null) {
      // Whatever this instance still holds belongs to the old id, which the
      // fleet has written off: its workers must register again (issue 23).
      endLocal({ ...UNAVAILABLE, code: "cluster_instance_reset" }, 1012);
      instanceId = newInstanceId();
    }
    seq = 0;
    // Catch up before appending anything: our records must not lag the log.
    for (;;) {
      const batch = await engine.read(lastId, 0, 5000);
      if (batch.length === 0) break;
      for (const entry of batch) applyEntry(entry, true);
    }
    up = true;
    const gen = ++generation;
    if (old !== null && !fresh) {
      appendRecord({
        kind: "left",
        instance: instanceId,
        seq: ++seq,
        appliedMs,
        who: old,
      });
    }
    log("info", "joined the relay cluster", {
      instance: instanceId,
      position: lastId,
      instances: cs.instances.size,
    });
    void readLoop(gen);
    if (old !== null) { for (const l of rejoinListeners) l(fresh); }
  }

  function resetCluster(next: ClusterState): void {
    cs.core = next.core;
    cs.instances = next.instances;
    cs.dead = next.dead;
    cs.workerOwner = next.workerOwner;
    cs.requestOwner = next.requestOwner;
    cs.lastMs = next.lastMs;
    cs.quiet = next.quiet;
  }

  async function readLoop(gen: number): Promise<void> {
    while (!closed && gen === generation) {
      let batch: LogEntry[];
      try {
        batch = await engine.read(lastId, 1000, 1000);
      } catch (e) {
        if (gen === generation) lost(`read failed: ${e}`);
        return;
      }
      if (gen !== generation) return;
      for (const entry of batch) applyEntry(entry, false);
    }
  }

  function appendRecord(record: ClusterRecord): void {
    unacked.push(record);
    if (heldSince === null) sendRecord(record, record.appliedMs);
  }

  /** Appended again after a hold, a record says how far this replica is now. */
  function sendRecord(record: ClusterRecord, applied: number | null): void {
    record.appliedMs = applied;
    engine.append(encodeRecord(record)).then(() => {
      const i = unacked.indexOf(record);
      if (i >= 0) unacked.splice(i, 1);
    }, (e) => lost(`append failed: ${e}`));
  }

  function appendNote(note: Note): void {
    if (!up) throw new Error("the relay cluster is unavailable");
    flush();
    appendRecord({
      kind: "note",
      instance: instanceId,
      seq: ++seq,
      appliedMs,
      note,
    });
  }

  function flush(): void {
    flushScheduled = false;
    if (outbox.length === 0 || (!up && heldSince === null)) return;
    const events = outbox;
    outbox = [];
    const ends = outboxDirect;
    outboxDirect = undefined;
    appendRecord({
      kind: "events",
      instance: instanceId,
      seq: ++seq,
      appliedMs,
      events,
      ...(peerUrl === undefined ? {} : { peer: peerUrl }),
      ...(ends === undefined ? {} : { direct: ends }),
    });
  }

  function queue(event: Event): void {
    outbox.push(event);
    if (!flushScheduled) {
      flushScheduled = true;
      setImmediate(flush);
    }
  }

  /** What an event becomes while the log is unreachable: new work is refused here and now. */
  function refuseLocally(event: Event): void {
    if (event.kind === "requestReceived") {
      run({
        kind: "respondError",
        requestId: event.requestId,
        error: UNAVAILABLE,
      }, false);
    } else if (event.kind === "workerConnectAttempted") {
      // The attempt is still a pending handshake, not an open socket: only
      // rejectWorker answers it (closeWorker knows open sockets only).
      run({
        kind: "rejectWorker",
        workerId: event.workerId,
        code: 1013,
        reason: "relay cluster unavailable: try again later",
      }, false);
    }
  }

  let leaving: Promise<void> | null = null;
  /**
   * A graceful stop of one instance is not a fleet shutdown: its workers are
   * drained (they reconnect to another instance through the balancer), its
   * clients' requests finish, then it leaves the log.
   */
  function leave(): Promise<void> {
    leaving ??= (async () => {
      const now = () => state.nowMs;
      for (const workerId of d.sockets.keys()) {
        submit({
          kind: "workerDrainRequested",
          atMs: now(),
          workerId,
          reason: "relay instance stopping",
        });
      }
      const until = Date.now() + d.coreConfig.drainTimeoutMs;
      while (
        up && Date.now() < until && (d.clients.size > 0 || d.sockets.size > 0)
      ) {
        await new Promise((r) => setTimeout(r, 100));
      }
      flush();
      if (up) {
        appendRecord({
          kind: "left",
          instance: instanceId,
          seq: ++seq,
          appliedMs,
          who: instanceId,
        });
      }
      endLocal({ ...UNAVAILABLE, code: "server_shutdown" }, 1001);
      d.runEffect({ kind: "shutdownComplete" });
    })();
    return leaving;
  }

  function submit(event: Event): void {
    if (event.kind === "shutdownRequested") {
      void leave();
      return;
    }
    if (event.kind === "tick") direct.tick();
    // While the log is held, only what in-flight work reports is kept.
    if (
      !up && (heldSince === null || event.kind === "requestReceived" ||
        event.kind === "workerConnectAttempted" || event.kind === "tick")
    ) return refuseLocally(event);
    if (event.kind === "requestReceived") {
      // A stopping instance takes no new work (C30); the balancer's retry or
      // the client's lands on another instance.
      if (leaving !== null) {
        return run({
          kind: "respondError",
          requestId: event.requestId,
          error: {
            status: 503,
            code: "server_shutdown",
            message: "this relay instance is shutting down; retry",
            retryAfterSecs: 1,
          },
        }, false);
      }
      localRequests.add(event.requestId);
    }
    const routed = direct.routeWorkerEvent(event);
    if (routed.taken) return;
    if (routed.pieces !== null && "requestId" in event) {
      (outboxDirect ??= {})[String(event.requestId)] = routed.pieces;
    }
    queue(routed.event);
  }

  engine.onStatus((s, loss) => {
    if (s !== "down") return;
    if (loss?.kind !== "reset") return lost("engine connection closed");
    // The log lost entries this replica applied, or was replaced (issue 23):
    // a hold cannot resume on it, so what is held is given up at once.
    lost(`log reset: ${loss.detail}`);
    if (heldSince !== null) giveUp(`the log was reset: ${loss.detail}`);
  });
  await join();
  return {
    state,
    submit,
    engine,
    get instanceId() {
      return instanceId;
    },
    cluster: cs,
    get up() {
      return up;
    },
    appendNote,
    onNote(listener) {
      noteListeners.push(listener);
    },
    onRejoined(listener) {
      rejoinListeners.push(listener);
    },
    advertise(url) {
      peerUrl = url;
    },
    peerSecret: () => peerSecret,
    peerUpgrade: links.onUpgrade,
    async close() {
      if (closed) return;
      if (up && leaving === null) {
        flush();
        await engine.append(encodeRecord(
          {
            kind: "left",
            instance: instanceId,
            seq: ++seq,
            appliedMs,
            who: instanceId,
          } satisfies ClusterRecord,
        )).catch(() => {});
      }
      closed = true;
      up = false;
      generation++;
      clearTimeout(retryTimer);
      clearTimeout(resumeTimer);
      links.close();
      await engine.close();
    },
  };
}
