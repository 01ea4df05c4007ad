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
// connection's `bufferedAmount`, frames queued while it opens included). A peer that
// does not read (stopped, starved, its network stuck) is cut past it: the
// link is terminated, so its close takes the path of any broken link (the
// answers sent over it end `cluster_link_lost`, their workers told to stop),
// rather than holding memory for a reader that may never come back.
import type { DirectChunk, InstanceId } from "../../../core/cluster/mod.ts";
import { bearerCheck } from "../secret.ts";
import type { Logger } from "../../log.ts";
import { connectWebSocket } from "../../ws/client.ts";
import type { WsConnection } from "../../ws/connection.ts";
import { headerOf } from "../../ws/handshake.ts";
import type { Upgrade } from "../../ws/upgrade.ts";

export const PEER_PATH = "/_relay/peer";
const INSTANCE_HEADER = "x-relay-instance";
/** Unsent bytes one link may hold: 16 slow clients' worth (CLIENT_BUFFER_BYTES' default, 4 MiB). */
export const PEER_QUEUED_BYTES_MAX = 64 * 1024 * 1024;
/** Largest piece a link takes (what the `ws` package's default was: 100 MiB). */
const PEER_FRAME_BYTES_MAX = 100 * 1024 * 1024;

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
  /** Takes the upgrade when it is a peer link; false for any other path. */
  onUpgrade(upgrade: Upgrade): boolean;
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
  /** Frames sent while it opens wait in it (its bufferedAmount counts them). */
  ws: WsConnection;
  used: boolean;
};

/** One instance's links, beside what it needs from the runtime. */
type Links = PeerLinkDeps & {
  outbound: Map<InstanceId, Outbound>;
  inbound: Set<WsConnection>;
};

export function startPeerLinks(d: PeerLinkDeps): PeerLinks {
  const l: Links = { ...d, outbound: new Map(), inbound: new Set() };
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
      const state = link.ws.state;
      // Closing: its close already ran or will run.
      if (state === "closing" || state === "closed") return l.onLinkBroke(to);
      link.ws.sendBinary(encodePiece(piece));
      const unsent = link.ws.bufferedAmount;
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
    onUpgrade: (upgrade) => accept(l, upgrade),
    closeOutbound,
    close() {
      closeOutbound();
      for (const ws of l.inbound) ws.terminate();
    },
  };
}

function open(l: Links, to: InstanceId, url: string): Outbound {
  const target = new URL(PEER_PATH, url);
  target.protocol = target.protocol === "https:" ? "wss:" : "ws:";
  let opened = false;
  const link: Outbound = {
    ws: connectWebSocket(target, {
      headers: {
        authorization: `Bearer ${l.secret()}`,
        [INSTANCE_HEADER]: l.self(),
      },
      // Nothing comes back over an outbound link.
      maxPayload: 1024,
    }, {
      onOpen: () => opened = true,
      onText: ignore,
      onBinary: ignore,
      onClose: (_code, reason) => {
        if (!opened) l.log("warn", "peer link failed", { to, error: reason });
        if (l.outbound.get(to) === link) l.outbound.delete(to);
        if (link.used) l.onLinkBroke(to);
      },
    }),
    used: false,
  };
  l.outbound.set(to, link);
  return link;
}

/** An inbound link: authenticated with the cluster secret, then pieces in. */
function accept(l: Links, upgrade: Upgrade): boolean {
  if (new URL(upgrade.url, "http://x").pathname !== PEER_PATH) return false;
  const from = headerOf(upgrade.headers, INSTANCE_HEADER);
  if (from === undefined || bearerCheck(upgrade, l.secret()) !== "ok") {
    upgrade.reply("HTTP/1.1 401 Unauthorized\r\nconnection: close\r\n\r\n");
    return true;
  }
  const ws = upgrade.accept({ maxPayload: PEER_FRAME_BYTES_MAX }, {
    onText: ignore,
    onBinary: (bytes) => {
      try {
        l.onPiece(decodePiece(bytes), from);
      } catch (e) {
        l.log("warn", "unreadable peer frame", { from, error: String(e) });
      }
    },
    onClose: () => {
      if (ws !== null) l.inbound.delete(ws);
      l.onPeerGone(from);
    },
  });
  if (ws !== null) l.inbound.add(ws);
  return true;
}

function ignore(): void {}
