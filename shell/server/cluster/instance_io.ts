// The cluster instance's ports over Redis and WebSockets (issue 34): what the
// engine, the peer links and the timers report becomes a `HostInput` of
// core/cluster/host.ts, and each port call of the host is done here. Nothing
// is decided here: the outbox, the ownership filter, the data path and the
// life cycle are the host's and the instance's (core/cluster/).
import { setImmediate } from "node:timers";
import type { Effect, Event } from "../../../core/mod.ts";
import {
  configDigest,
  encodeRecord,
  REDUCER_VERSION,
} from "../../../core/cluster/mod.ts";
import type { InstanceState, Note } from "../../../core/cluster/instance.ts";
import {
  appendNote as hostAppendNote,
  type ClusterPorts,
  type Host,
  type HostInput,
  makeHost,
  stepHost,
  type Unstamped,
} from "../../../core/cluster/host.ts";
import type { WsConnection } from "../../ws/connection.ts";
import type { Config, State } from "../../../core/mod.ts";
import type { Liveness } from "../../../core/cluster/mod.ts";
import type { Logger } from "../../log.ts";
import type { Clients } from "../http/clients.ts";
import type { ClusterEngine } from "./engine.ts";
import { type PeerLinks, startPeerLinks } from "./peer_link.ts";

export type ClusterDeps = {
  engine: ClusterEngine;
  /** The server's state object: replaced in place on join and reset. */
  state: State;
  coreConfig: Config;
  clients: Clients;
  sockets: Map<string, WsConnection>;
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
  host: Host;
  /** Resolves true once a catch-up read reached the log's end. */
  caughtUp: Promise<boolean>;
  lastError: unknown;
  /** Appends under way: closing waits for them. */
  appends: Set<Promise<void>>;
  links: PeerLinks;
  peerSecret: string;
  retryTimer: ReturnType<typeof setTimeout> | undefined;
  noteListeners: ((note: Note, mine: boolean) => void)[];
  rejoinListeners: ((fresh: boolean) => void)[];
};

/** Joins the log for the first time; throws (the server exits) when it cannot. */
export async function firstJoin(
  d: ClusterDeps,
  inst: InstanceState,
): Promise<InstanceIo> {
  const io = {
    d,
    caughtUp: Promise.resolve(false),
    lastError: null,
    appends: new Set(),
    peerSecret: d.clusterSecret ?? "",
    retryTimer: undefined,
    noteListeners: [],
    rejoinListeners: [],
  } as unknown as InstanceIo;
  io.host = makeHost(inst, ports(io));
  io.links = startPeerLinks({
    secret: () => io.peerSecret,
    self: () => inst.id,
    onPiece: (piece, from) => input(io, { kind: "pieceArrived", piece, from }),
    onPeerGone: (from) => input(io, { kind: "peerGone", from }),
    onLinkBroke: (to) => input(io, { kind: "linkBroke", to }),
    log: d.log,
  });
  d.engine.onStatus((s, loss) => {
    if (s !== "down") return;
    input(io, {
      kind: "logLost",
      reason: loss?.detail ?? "engine connection closed",
      reset: loss?.kind === "reset",
    });
  });
  try {
    input(io, await readJoin(io));
    if (!(await io.caughtUp)) throw io.lastError;
  } catch (e) {
    io.host.closed = true;
    clearTimeout(io.retryTimer);
    io.links.close();
    throw e;
  }
  return io;
}

/** Into the host, stamped with the shell's one clock. */
function input(io: InstanceIo, i: Unstamped): void {
  stepHost(io.host, { ...i, atMs: performance.now() } as HostInput);
}

function ports(io: InstanceIo): ClusterPorts {
  const { d } = io;
  return {
    append(record, ticket) {
      const p = d.engine.append(encodeRecord(record)).then(
        () => input(io, { kind: "appendAcked", ticket }),
        (e) => input(io, { kind: "appendFailed", ticket, error: String(e) }),
      );
      io.appends.add(p);
      p.finally(() => io.appends.delete(p));
    },
    read(generation) {
      io.caughtUp = follow(io, generation);
    },
    join() {
      readJoin(io).then((i) => input(io, i)).catch((e) =>
        input(io, {
          kind: "joinFailed",
          error: String(e),
          refused: e instanceof ClusterJoinError,
        })
      );
    },
    resume(last) {
      // Is the last entry applied here still in the log? Asked with holds(),
      // not a read after a made-up id: the engine takes a read's id as this
      // instance's position for its own tail check.
      const kept = last === null ? Promise.resolve(null) : d.engine.holds(last);
      Promise.all([d.engine.epoch(), kept]).then(
        ([epoch, lastEntryKept]) =>
          input(io, { kind: "resumeRead", epoch, lastEntryKept }),
        (e) => input(io, { kind: "resumeFailed", error: String(e) }),
      );
    },
    putSnapshot(snapshot, trimBeforeId, digest) {
      d.engine.putSnapshot(snapshot, trimBeforeId).then(() =>
        input(io, { kind: "snapshotStored", id: snapshot.id, digest })
      ).catch((e) =>
        d.log("warn", "cluster snapshot failed", { error: String(e) })
      );
    },
    sendPiece: (to, url, piece) => io.links.send(to, url, piece),
    closeLinks: () => io.links.closeOutbound(),
    holds: {
      client: (id) => d.clients.has(id),
      clientStarted: (id) => d.clients.get(id)?.res.headersSent === true,
      worker: (id) => d.sockets.has(id),
      handshake: (id) => d.workerPending?.(id) === true,
      clients: () => [...d.clients.keys()],
      workers: () => [...d.sockets.keys()],
      handshakes: () => d.workersPending?.() ?? [],
    },
    run: (effect) => d.runEffect(effect),
    arm(timer, ms) {
      if (timer === "flush") {
        return void setImmediate(() => input(io, { kind: "flushDue" }));
      }
      io.retryTimer = setTimeout(() => {
        io.retryTimer = undefined;
        input(io, { kind: "retryDue" });
      }, ms);
    },
    log: (level, message, fields) => d.log(level, message, fields),
    fact(f) {
      switch (f.kind) {
        case "note":
          for (const l of io.noteListeners) l(f.note, f.mine);
          return;
        case "rejoined":
          for (const l of io.rejoinListeners) l(f.fresh);
          return;
        case "left":
          return d.runEffect({ kind: "shutdownComplete" });
        case "inputFailed":
          // A broken invariant is our bug: report it loudly, keep serving others.
          return d.log("error", "core rejected a cluster input", {
            input: f.input,
            error: f.error,
          });
      }
    },
  };
}

/** The version gate (a log reset also resets it), then the epoch and snapshot. */
async function readJoin(io: InstanceIo): Promise<Unstamped> {
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

/** Catches up on the log (quietly), reports caughtUp, then tails it. */
async function follow(io: InstanceIo, generation: number): Promise<boolean> {
  const { host, d } = io;
  const stale = () => generation !== host.generation || host.closed;
  try {
    for (;;) {
      const batch = await d.engine.read(host.inst.position, 0, 5000);
      if (stale()) return false;
      if (batch.length === 0) break;
      for (const entry of batch) {
        input(io, { kind: "entryRead", generation, entry });
      }
    }
  } catch (e) {
    io.lastError = e;
    input(io, { kind: "readFailed", generation, error: String(e) });
    return false;
  }
  input(io, { kind: "caughtUp", generation });
  void tail(io, generation, stale);
  return true;
}

async function tail(
  io: InstanceIo,
  generation: number,
  stale: () => boolean,
): Promise<void> {
  while (!stale()) {
    let batch;
    try {
      batch = await io.d.engine.read(io.host.inst.position, 1000, 1000);
    } catch (e) {
      const reason = `read failed: ${e}`;
      return input(io, { kind: "logLost", reason, reset: false, generation });
    }
    for (const entry of batch) {
      if (stale()) return;
      input(io, { kind: "entryRead", generation, entry });
    }
  }
}

/** An event this instance observed (sockets, HTTP, timers). */
export function submitObserved(io: InstanceIo, event: Event): void {
  input(io, { kind: "observed", event });
}

export function appendNote(io: InstanceIo, note: Note): void {
  hostAppendNote(io.host, note);
}

/** Where peers send this instance answer pieces (CLUSTER_ADVERTISE_URL). */
export function advertise(io: InstanceIo, url: string): void {
  io.host.peerUrl = url;
}

/** Stops at once: a serving instance says it left; pending appends finish first. */
export async function closeInstance(io: InstanceIo): Promise<void> {
  if (io.host.closed) return;
  input(io, { kind: "closeRequested" });
  await Promise.allSettled([...io.appends]);
  clearTimeout(io.retryTimer);
  io.links.close();
  await io.d.engine.close();
}
