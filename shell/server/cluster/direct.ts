// The direct data path's shell (issue 23): holds this instance's sender and
// receiver maps (rules in core/cluster/data_path.ts) and moves answer pieces,
// by a function call when the client is here, else over a peer link
// (peer_link.ts). The cluster runtime calls it at four points: an event from a
// worker (`fromWorker`), a record about to be applied (`beforeRecord`), an
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
  piecesBefore,
  type ReceiverAction,
  receiverDue,
  type Receivers,
  requestEnded,
  routeChunk,
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

export type DirectPath = {
  /**
   * An event from a worker socket held here. A chunk is handled here (true:
   * not to be logged as is); for an event that ends an answer, returns how
   * many pieces went direct before it in `pieces` (for the record's `direct`).
   */
  fromWorker(event: Event): { taken: boolean; pieces: number | null };
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

export function makeDirectPath(d: DirectDeps): DirectPath {
  const senders: Senders = new Map();
  const receivers: Receivers = new Map();

  function carry(actions: ReceiverAction[]): void {
    for (const a of actions) {
      d.run(
        a.kind === "write"
          ? { kind: "writeChunk", requestId: a.requestId, chunk: a.chunk }
          : a.effect,
      );
    }
  }

  function deliver(to: InstanceId, piece: DirectChunk): void {
    if (to === d.self()) {
      return carry(pieceArrived(receivers, piece, to, d.now()));
    }
    const url = d.cs.instances.get(to)?.peerUrl;
    if (url === undefined) {
      // Nowhere to send it: the answer is cut like one whose link broke.
      for (const c of linkBroke(senders, to)) {
        d.cut(c.requestId, c.workerId, "link_lost");
      }
      return;
    }
    d.links.send(to, url, piece);
  }

  return {
    fromWorker(event) {
      if (event.kind !== "chunkReceived") {
        const ended = piecesBefore(senders, event);
        return { taken: false, pieces: ended?.pieces ?? null };
      }
      const owner = d.cs.requestOwner.get(event.requestId);
      const route = routeChunk(senders, d.cs.core, owner, event);
      switch (route.kind) {
        case "log":
          return { taken: false, pieces: null };
        case "drop":
          return { taken: true, pieces: null };
        case "cut":
          d.cut(route.requestId, route.workerId, route.reason);
          return { taken: true, pieces: null };
        case "direct":
          if (route.commit !== null) d.log(route.commit);
          deliver(route.to, route.piece);
          return { taken: true, pieces: null };
      }
    },
    beforeRecord(record) {
      if (record.kind !== "events" || record.direct === undefined) return;
      for (const [requestId, n] of Object.entries(record.direct)) {
        expectPieces(receivers, requestId, n);
      }
    },
    onEffect(effect) {
      if (effect.kind === "sendToWorker") {
        const m = effect.message;
        if (m.type === "request" && d.holdsClient(m.request_id)) {
          carry(
            dispatched(receivers, m.request_id, effect.workerId, d.now()),
          );
        }
        return false;
      }
      if (effect.kind === "requestFinished") {
        requestEnded(receivers, effect.requestId);
        return false;
      }
      if (
        (effect.kind === "startStream" || effect.kind === "writeChunk" ||
          effect.kind === "endStream" || effect.kind === "respond" ||
          effect.kind === "respondError") && d.holdsClient(effect.requestId)
      ) {
        carry(logEffect(receivers, effect, d.now()));
        return true;
      }
      return false;
    },
    pieceFrom(piece, from) {
      carry(pieceArrived(receivers, piece, from, d.now()));
    },
    peerGone(from) {
      carry(peerGone(receivers, from));
    },
    linkBroke(to) {
      for (const c of linkBroke(senders, to)) {
        d.cut(c.requestId, c.workerId, "link_lost");
      }
    },
    tick() {
      forgetSent(senders, d.cs.core);
      const due = receiverDue(
        receivers,
        d.now(),
        d.cs.core.config.requestTimeoutMs,
        DATA_PATH_DEFAULTS.endWaitMs,
      );
      for (const s of due.idle) d.cut(s.requestId, s.workerId, "idle");
      carry(due.actions);
    },
    reset() {
      senders.clear();
      receivers.clear();
      d.links.closeOutbound();
    },
  };
}
