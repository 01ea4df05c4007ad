// The simulator's peer links (issue 23): pieces land in order, a clean close
// reaches the peer after what is on the link, a crash may lose what is on it.
import type { DirectChunk, InstanceId } from "../../core/cluster/mod.ts";
import {
  type Action,
  answerOf,
  type Client,
  type Conn,
  feed,
  type Inst,
  later,
  type Link,
  type World,
} from "./shape.ts";

// ---- the direct path's links -------------------------------------------------------

export function sendPiece(
  w: World,
  inst: Inst,
  to: InstanceId,
  url: string,
  piece: DirectChunk,
): void {
  let link = w.links.find((l) => l.from === inst.idx && l.to === url);
  if (link === undefined) {
    link = {
      from: inst.idx,
      fromId: inst.host.inst.id,
      to: url,
      toId: to,
      lastAtMs: 0,
      severed: false,
    };
    w.links.push(link);
  }
  w.stats.piecesSent++;
  if (w.crashAtEnd && piece.end !== undefined) {
    w.crashAtEnd = false;
    w.dieAfterAppend = inst;
  }
  w.trace?.(
    `${w.now} ${inst.host.inst.id} piece ${piece.requestId}#${piece.seq} to ${to}`,
  );
  const at = Math.max(
    link.lastAtMs,
    w.now + w.prng.int(1, w.prng.chance(1, 3) ? 40 : 3),
  );
  link.lastAtMs = at;
  w.queue.push(at, {
    k: "piece",
    link,
    piece,
    lostIfSenderDies: w.prng.chance(1, 2),
  });
}

export function deliverPiece(
  w: World,
  a: Extract<Action, { k: "piece" }>,
): void {
  // A piece on a link whose sender died may be lost with the link.
  if (a.link.severed && a.lostIfSenderDies) return;
  const to = w.insts.find((x) => x.url === a.link.to);
  if (to === undefined || to.proc === "crashed" || to.proc === "exited") return;
  if (to.proc === "frozen") {
    w.queue.push(to.thawAtMs, a); // its socket buffers until it thaws
    return;
  }
  feed(w, to, { kind: "pieceArrived", piece: a.piece, from: a.link.fromId });
  const c = w.clients.get(a.piece.requestId);
  const conn = w.conns.get(a.piece.workerId);
  if (a.piece.end !== undefined && c?.inst === to.idx && conn !== undefined) {
    completed(w, c, conn);
  }
}

/** The client's instance learnt that `conn` completed the client's answer. */
export function completed(w: World, c: Client, conn: Conn): void {
  const per = w.completedAt.get(c.id) ?? new Map<string, number>();
  per.set(answerOf(c, conn), w.now);
  w.completedAt.set(c.id, per);
}

/** The instance closes its outbound links: each peer hears its inbound one close. */
export function closeLinksFrom(w: World, inst: Inst): void {
  for (const l of w.links.filter((l) => l.from === inst.idx)) {
    closeLink(w, l, false);
  }
}

/**
 * A link closes: the receiving end learns (peerGone); when the receiving
 * process died, the sending end learns too (linkBroke).
 */
export function closeLink(w: World, l: Link, receiverDied: boolean): void {
  w.links = w.links.filter((x) => x !== l);
  w.linksLost = true;
  const to = w.insts.find((x) => x.url === l.to);
  if (to !== undefined && !receiverDied) {
    // After the pieces already on the link (one socket: in order).
    const at = Math.max(l.lastAtMs, w.now) + 1;
    later(w, to, at - w.now, { kind: "peerGone", from: l.fromId });
  }
  const from = w.insts[l.from];
  if (from !== undefined && receiverDied) {
    later(w, from, 1, { kind: "linkBroke", to: l.toId });
  }
}

/** A process ends: every link to or from it closes. */
export function linksDie(w: World, inst: Inst): void {
  for (const l of [...w.links]) {
    if (l.to === inst.url) closeLink(w, l, true);
    else if (l.from === inst.idx) closeLink(w, l, false);
  }
}
