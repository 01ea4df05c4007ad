// The direct data path's shell (issue 23): holds this instance's sender and
// receiver maps (rules in core/cluster/data_path.ts) and moves answer pieces,
// by a function call when the client is here, else over a peer link
// (peer_link.ts). The cluster runtime calls it at four points: an event from a
// worker (`routeWorkerEvent`), a record about to be applied (`beforeRecord`), an
// effect of the replica (`onEffect`), and time (`tick`).
import type { Effect, Event } from "../../../core/mod.ts";
import {
  type ClusterRecord,
  type ClusterState,
  type CutReason,
  DATA_PATH_DEFAULTS,
  type DirectChunk,
  dispatched,
  expectPieces,
  forgetSent,
  type InstanceId,
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
} from "../../../core/cluster/mod.ts";
import type { PeerLinks } from "./peer_link.ts";

export type DirectDeps = {
  cs: ClusterState;
  self: () => InstanceId;
  /** Whether this instance holds the client of `requestId`. */
  holdsClient: (requestId: string) => boolean;
  /** Carries out a client effect here (the runtime's own `run`). */
  run: (effect: Effect) => void;
  /** Puts an event in the next log record (the stream's commit). */
  log: (event: Event) => void;
  /** Appends a `cut` record after the events queued before it. */
  cut: (requestId: string, workerId: string, reason: CutReason) => void;
  links: PeerLinks;
  /** Monotonic ms (the shell's clock; the receiver's timers only). */
  now: () => number;
};

export type Routed =
  | { taken: true }
  | { taken: false; event: Event; pieces: number | null };

const TAKEN: Routed = { taken: true };

export type DirectPath = {
  /**
   * An event from a worker socket held here: taken (a chunk the data path
   * carries), or the event to log (a completion without its body when the body
   * went direct) with how many pieces went direct before it (for the record's
   * `direct`). Log `event` as returned, never the one given: a completion's
   * body that went direct must not reach the log (and the client) again.
   */
  routeWorkerEvent(event: Event): Routed;
  /** A record is about to be applied here: its ends' piece counts. */
  beforeRecord(record: ClusterRecord): void;
  /** An effect of the replica; returns true when the data path carried it out or holds it. */
  onEffect(effect: Effect): boolean;
  /** A piece arrived over a peer link. */
  pieceFrom(piece: DirectChunk, from: InstanceId): void;
  peerGone(from: InstanceId): void;
  linkBroke(to: InstanceId): void;
  tick(): void;
  /** This instance ended or handed off everything it held: forget it all. */
  reset(): void;
};

/** One instance's two maps, beside what it needs from the runtime. */
type Ends = DirectDeps & { senders: Senders; receivers: Receivers };

export function makeDirectPath(d: DirectDeps): DirectPath {
  const c: Ends = { ...d, senders: new Map(), receivers: new Map() };
  return {
    routeWorkerEvent: (event) => fromWorker(c, event),
    beforeRecord(record) {
      if (record.kind !== "events" || record.direct === undefined) return;
      for (const [requestId, n] of Object.entries(record.direct)) {
        expectPieces(c.receivers, requestId, n);
      }
    },
    onEffect: (effect) => onEffect(c, effect),
    pieceFrom: (piece, from) =>
      carry(c, pieceArrived(c.receivers, piece, from, c.now())),
    peerGone: (from) => carry(c, peerGone(c.receivers, from)),
    linkBroke: (to) => cutLink(c, to),
    tick() {
      forgetSent(c.senders, c.cs.core);
      const due = receiverDue(
        c.receivers,
        c.now(),
        c.cs.core.config.requestTimeoutMs,
        DATA_PATH_DEFAULTS.endWaitMs,
      );
      for (const s of due.idle) c.cut(s.requestId, s.workerId, "idle");
      carry(c, due.actions);
    },
    reset() {
      c.senders.clear();
      c.receivers.clear();
      c.links.closeOutbound();
    },
  };
}

function carry(c: Ends, actions: ReceiverAction[]): void {
  for (const a of actions) {
    c.run(
      a.kind === "write"
        ? { kind: "writeChunk", requestId: a.requestId, chunk: a.chunk }
        : a.effect,
    );
  }
}

/** Every answer being sent to `to` may have lost pieces: each is cut. */
function cutLink(c: Ends, to: InstanceId): void {
  for (const x of linkBroke(c.senders, to)) {
    c.cut(x.requestId, x.workerId, "link_lost");
  }
}

function deliver(c: Ends, to: InstanceId, piece: DirectChunk): void {
  if (to === c.self()) {
    return carry(c, pieceArrived(c.receivers, piece, to, c.now()));
  }
  const url = c.cs.instances.get(to)?.peerUrl;
  // Nowhere to send it: the answer is cut like one whose link broke.
  if (url === undefined) return cutLink(c, to);
  c.links.send(to, url, piece);
}

function fromWorker(c: Ends, event: Event): Routed {
  if (event.kind !== "chunkReceived") {
    const rid = "requestId" in event ? event.requestId : null;
    const end = routeEnd(
      c.senders,
      c.cs.core,
      rid === null ? undefined : c.cs.requestOwner.get(rid),
      event,
    );
    if (end.cut && event.kind === "completeReceived") {
      c.cut(event.requestId, event.workerId, "too_large");
    }
    for (const piece of end.last?.pieces ?? []) {
      deliver(c, end.last!.to, piece);
    }
    return { taken: false, event: end.event, pieces: end.pieces };
  }
  const owner = c.cs.requestOwner.get(event.requestId);
  const route = routeChunk(c.senders, c.cs.core, owner, event);
  switch (route.kind) {
    case "log":
      return { taken: false, event, pieces: null };
    case "drop":
      return TAKEN;
    case "cut":
      c.cut(route.requestId, route.workerId, route.reason);
      return TAKEN;
    case "direct":
      if (route.commit !== null) c.log(route.commit);
      deliver(c, route.to, route.piece);
      return TAKEN;
  }
}

function onEffect(c: Ends, effect: Effect): boolean {
  if (effect.kind === "sendToWorker") {
    const m = effect.message;
    if (m.type === "request" && c.holdsClient(m.request_id)) {
      carry(c, dispatched(c.receivers, m.request_id, effect.workerId, c.now()));
    }
    return false;
  }
  if (effect.kind === "requestFinished") {
    requestEnded(c.receivers, effect.requestId);
    return false;
  }
  if (
    (effect.kind === "startStream" || effect.kind === "writeChunk" ||
      effect.kind === "endStream" || effect.kind === "respond" ||
      effect.kind === "respondError") && c.holdsClient(effect.requestId)
  ) {
    carry(c, logEffect(c.receivers, effect, c.now()));
    return true;
  }
  return false;
}
