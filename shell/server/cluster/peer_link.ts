// The direct links between cluster instances (issue 23): answer pieces go from
// the instance holding the worker to the instance holding the client over one
// WebSocket per peer, never through Redis. Each instance takes links on its own
// port at PEER_PATH, authenticated with the cluster secret (CLUSTER_SECRET);
// each link says which instance opened it. The link carries binary frames
// only, one piece each: a small header (request id, worker id, sequence
// number, whether the piece was text) and the piece's bytes.
//
// A link that closes is a socket that died: the sender cuts what it was
// sending over it (`linkBroke`), the receiver ends what waits on it
// (`peerGone`); both rules are in core/cluster/data_path.ts.
//
// Issue 33: what a link may hold unsent is bounded (PEER_QUEUED_BYTES_MAX: the
// socket's `bufferedAmount`, or the frames queued while it opens). A peer that
// does not read (stopped, starved, its network stuck) is cut past it: the
// link is terminated, so its close takes the path of any broken link (the
// answers sent over it end `cluster_link_lost`, their workers told to stop),
// rather than holding memory for a reader that may never come back.
import type { IncomingMessage } from "node:http";
import type { HttpRequest } from "../door/exchange.ts";
import type { Duplex } from "node:stream";
import { Buffer } from "node:buffer";
// @ts-types="npm:@types/ws@8.18.1"
import { WebSocket, WebSocketServer } from "ws";
import type { DirectChunk, InstanceId } from "../../../core/cluster/mod.ts";
import { bearerCheck } from "../secret.ts";
import type { Logger } from "../../log.ts";

export const PEER_PATH = "/_relay/peer";
const INSTANCE_HEADER = "x-relay-instance";
/** Unsent bytes one link may hold: 16 slow clients' worth (CLIENT_BUFFER_BYTES' default, 4 MiB). */
export const PEER_QUEUED_BYTES_MAX = 64 * 1024 * 1024;

export type PeerLinkDeps = {
  /** The cluster secret (fixed, or read from the log's engine). */
  secret: () => string;
  /** This instance's id, sent when a link opens. */
  self: () => InstanceId;
  onPiece: (piece: DirectChunk, from: InstanceId) => void;
  /** An inbound link from `from` closed. */
  onPeerGone: (from: InstanceId) => void;
  /** The outbound link to `to` closed after carrying pieces. */
  onLinkBroke: (to: InstanceId) => void;
  log: Logger;
  /** Unsent bytes one outbound link may hold before it is cut (default PEER_QUEUED_BYTES_MAX). */
  queuedBytesMax?: number;
};

export type PeerLinks = {
  /** Sends a piece to instance `to` at `url`; queued while its link opens. */
  send(to: InstanceId, url: string, piece: DirectChunk): void;
  /** Takes the HTTP upgrade when it is a peer link; false for any other path. */
  onUpgrade(req: HttpRequest, socket: Duplex, head: Buffer): boolean;
  /** Closes every outbound link (this instance's id changed, or it stops). */
  closeOutbound(): void;
  close(): void;
};

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * [flags u8][rid len u16][wid len u16][seq u32][rid][wid][piece]; flags bit 0
 * = text, bit 1 = a stream's end marker, whose piece is its `end` as JSON.
 */
export function encodePiece(p: DirectChunk): Uint8Array {
  const rid = encoder.encode(p.requestId);
  const wid = encoder.encode(p.workerId);
  const body = p.end !== undefined
    ? encoder.encode(JSON.stringify(p.end))
    : typeof p.chunk === "string"
    ? encoder.encode(p.chunk)
    : p.chunk;
  const out = new Uint8Array(9 + rid.length + wid.length + body.length);
  const view = new DataView(out.buffer);
  view.setUint8(
    0,
    (typeof p.chunk === "string" ? 1 : 0) | (p.end !== undefined ? 2 : 0),
  );
  view.setUint16(1, rid.length);
  view.setUint16(3, wid.length);
  view.setUint32(5, p.seq);
  out.set(rid, 9);
  out.set(wid, 9 + rid.length);
  out.set(body, 9 + rid.length + wid.length);
  return out;
}

export function decodePiece(frame: Uint8Array): DirectChunk {
  const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  const text = (view.getUint8(0) & 1) === 1;
  const ridLen = view.getUint16(1);
  const widLen = view.getUint16(3);
  const at = 9 + ridLen + widLen;
  if (at > frame.length) throw new Error("truncated peer frame");
  const body = frame.subarray(at);
  const piece: DirectChunk = {
    requestId: decoder.decode(frame.subarray(9, 9 + ridLen)),
    workerId: decoder.decode(frame.subarray(9 + ridLen, at)),
    seq: view.getUint32(5),
    chunk: text ? decoder.decode(body) : body,
  };
  if ((view.getUint8(0) & 2) === 0) return piece;
  return { ...piece, chunk: "", end: JSON.parse(decoder.decode(body)) };
}

type Outbound = {
  ws: WebSocket;
  queue: Uint8Array[];
  /** Bytes in `queue`. */
  queued: number;
  used: boolean;
};

/** One instance's links, beside what it needs from the runtime. */
type Links = PeerLinkDeps & {
  outbound: Map<InstanceId, Outbound>;
  inbound: Set<WebSocket>;
  wss: WebSocketServer;
};

export function startPeerLinks(d: PeerLinkDeps): PeerLinks {
  const l: Links = {
    ...d,
    outbound: new Map(),
    inbound: new Set(),
    wss: new WebSocketServer({ noServer: true, perMessageDeflate: false }),
  };
  function closeOutbound(): void {
    for (const link of l.outbound.values()) {
      link.used = false; // a deliberate close breaks nothing
      link.ws.terminate();
    }
    l.outbound.clear();
  }
  return {
    send(to, url, piece) {
      const link = l.outbound.get(to) ?? open(l, to, url);
      link.used = true;
      const frame = encodePiece(piece);
      if (link.ws.readyState === WebSocket.OPEN) link.ws.send(frame);
      else if (link.ws.readyState === WebSocket.CONNECTING) {
        link.queue.push(frame);
        link.queued += frame.length;
      } else return l.onLinkBroke(to); // closing: its close already ran or will run
      const unsent = link.ws.bufferedAmount + link.queued;
      if (unsent > (l.queuedBytesMax ?? PEER_QUEUED_BYTES_MAX)) {
        l.log("warn", "peer link cut: its peer does not read", {
          to,
          unsent_bytes: unsent,
        });
        // Its close reports the break (it carried pieces): the answers sent
        // over it end, as over any link that broke.
        link.ws.terminate();
      }
    },
    onUpgrade: (req, socket, head) => accept(l, req, socket, head),
    closeOutbound,
    close() {
      closeOutbound();
      for (const ws of l.inbound) ws.terminate();
      l.wss.close();
    },
  };
}

function open(l: Links, to: InstanceId, url: string): Outbound {
  const target = new URL(PEER_PATH, url);
  target.protocol = target.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(target, {
    headers: {
      authorization: `Bearer ${l.secret()}`,
      [INSTANCE_HEADER]: l.self(),
    },
    perMessageDeflate: false,
  });
  const link: Outbound = { ws, queue: [], queued: 0, used: false };
  ws.on("open", () => {
    for (const frame of link.queue) ws.send(frame);
    link.queue = [];
    link.queued = 0;
  });
  ws.on(
    "error",
    (e) => l.log("warn", "peer link failed", { to, error: String(e) }),
  );
  ws.on("close", () => {
    if (l.outbound.get(to) === link) l.outbound.delete(to);
    if (link.used) l.onLinkBroke(to);
  });
  l.outbound.set(to, link);
  return link;
}

/** An inbound link: authenticated with the cluster secret, then pieces in. */
function accept(
  l: Links,
  req: HttpRequest,
  socket: Duplex,
  head: Buffer,
): boolean {
  if (new URL(req.url ?? "/", "http://x").pathname !== PEER_PATH) {
    return false;
  }
  const from = req.headers[INSTANCE_HEADER];
  if (typeof from !== "string" || bearerCheck(req, l.secret()) !== "ok") {
    socket.on("error", () => {});
    socket.end("HTTP/1.1 401 Unauthorized\r\nconnection: close\r\n\r\n");
    return true;
  }
  l.wss.handleUpgrade(req as unknown as IncomingMessage, socket, head, (ws) => {
    l.inbound.add(ws);
    ws.on("message", (data: Buffer, isBinary: boolean) => {
      if (!isBinary) return;
      try {
        l.onPiece(decodePiece(data), from);
      } catch (e) {
        l.log("warn", "unreadable peer frame", { from, error: String(e) });
      }
    });
    ws.on("error", () => {});
    ws.on("close", () => {
      l.inbound.delete(ws);
      l.onPeerGone(from);
    });
  });
  return true;
}
