import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { DirectChunk } from "../../../core/cluster/mod.ts";
import {
  decodePiece,
  encodePiece,
  type PeerLinks,
  startPeerLinks,
} from "./peer_link.ts";
import { nodeUpgrade } from "../worker_door/node_upgrade.ts";
import { parseTrustedProxies } from "../http/client_address.ts";

Deno.test("peer link frames: text and byte pieces decode to what was sent", () => {
  const text: DirectChunk = {
    requestId: "req-1",
    workerId: "wk-é",
    seq: 70_000,
    chunk: 'data: {"x":"héllo 🦊"}\n\n',
  };
  assert.deepEqual(decodePiece(encodePiece(text)), text);
  const bytes: DirectChunk = { ...text, chunk: new Uint8Array([0, 255, 10]) };
  const back = decodePiece(encodePiece(bytes));
  assert.deepEqual([...(back.chunk as Uint8Array)], [0, 255, 10]);
  assert.throws(() => decodePiece(encodePiece(text).subarray(0, 12)));
});

Deno.test("peer link frames: a stream's end marker carries the worker's counts and the deltas sent", () => {
  const end: DirectChunk = {
    requestId: "req-2",
    workerId: "wk-1",
    seq: 4,
    chunk: "",
    end: {
      tokenCounts: {
        prompt_tokens: 7,
        completion_tokens: 3,
        total_tokens: 10,
      },
      deltas: 3,
    },
  };
  assert.deepEqual(decodePiece(encodePiece(end)), end);
  const noCounts: DirectChunk = {
    ...end,
    end: { tokenCounts: null, deltas: null },
  };
  assert.deepEqual(decodePiece(encodePiece(noCounts)), noCounts);
});

type Side = {
  links: PeerLinks;
  server: Server;
  url: string;
  got: { piece: DirectChunk; from: string }[];
  gone: string[];
  broke: string[];
};

async function side(
  id: string,
  secret: string,
  queuedBytesMax?: number,
): Promise<Side & { logged: string[] }> {
  const logged: string[] = [];
  const got: Side["got"] = [];
  const gone: string[] = [];
  const broke: string[] = [];
  const links = startPeerLinks({
    secret: () => secret,
    self: () => id,
    onPiece: (piece, from) => got.push({ piece, from }),
    onPeerGone: (from) => gone.push(from),
    onLinkBroke: (to) => broke.push(to),
    log: (_level, message) => logged.push(message),
    ...(queuedBytesMax === undefined ? {} : { queuedBytesMax }),
  });
  const server = createServer((_req, res) => res.end());
  server.on("upgrade", (req, socket, head) => {
    const upgrade = nodeUpgrade(req, socket, head, {
      trustedProxies: parseTrustedProxies(""),
    });
    if (!links.onUpgrade(upgrade)) socket.destroy();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    links,
    server,
    url: `http://127.0.0.1:${port}`,
    got,
    gone,
    broke,
    logged,
  };
}

async function close(s: Side): Promise<void> {
  s.links.close();
  await new Promise<void>((r) => s.server.close(() => r()));
}

async function until(what: string, ok: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !ok(); i++) {
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.ok(ok(), what);
}

Deno.test("peer link: pieces sent before the link opened arrive in order, with the sender's id; closing it tells the receiver", async () => {
  const a = await side("A", "s3cret");
  const b = await side("B", "s3cret");
  for (let seq = 0; seq < 50; seq++) {
    a.links.send("B", b.url, {
      requestId: "r1",
      workerId: "w1",
      seq,
      chunk: `piece ${seq};`,
    });
  }
  await until("50 pieces at B", () => b.got.length === 50);
  assert.deepEqual(b.got.map((g) => g.piece.seq), [...Array(50).keys()]);
  assert.ok(b.got.every((g) => g.from === "A"));
  a.links.closeOutbound();
  await until("B sees A's link go", () => b.gone.includes("A"));
  assert.deepEqual(a.broke, [], "a deliberate close breaks nothing");
  await close(a);
  await close(b);
});

Deno.test("peer link: a peer with another secret is refused (401) and the sender's answers over it are cut", async () => {
  const a = await side("A", "wrong");
  const b = await side("B", "right");
  a.links.send("B", b.url, {
    requestId: "r1",
    workerId: "w1",
    seq: 0,
    chunk: "x",
  });
  await until("the sender learns the link broke", () => a.broke.includes("B"));
  assert.equal(b.got.length, 0);
  await close(a);
  await close(b);
});

/** A peer that accepts the link, then never reads from it (a stopped instance). */
async function deafPeer(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets: Socket[] = [];
  const server = createServer((_req, res) => res.end());
  server.on("upgrade", (req, socket: Socket) => {
    const accept = createHash("sha1")
      .update(
        `${
          req.headers["sec-websocket-key"]
        }258EAFA5-E914-47DA-95CA-C5AB0DC85B11`,
      )
      .digest("base64");
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: ${accept}\r\n\r\n`,
    );
    socket.pause();
    socket.on("error", () => {});
    sockets.push(socket);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

Deno.test("issue 33: a peer that does not read has its link cut once 1 MiB is unsent (the bound), and the sender's answers over it are cut, not held", async () => {
  const a = await side("A", "s3cret", 1024 * 1024);
  const deaf = await deafPeer();
  const piece = "x".repeat(64 * 1024);
  let seq = 0;
  // Pieces keep coming while the link is open: more than the kernel's socket
  // buffers take, so the rest waits in the sender's memory.
  while (!a.broke.includes("B") && seq < 4_000) {
    a.links.send("B", deaf.url, {
      requestId: "r1",
      workerId: "w1",
      seq: seq++,
      chunk: piece,
    });
    await new Promise((r) => setTimeout(r, 0));
  }
  await until("the sender learns the link broke", () => a.broke.includes("B"));
  assert.ok(a.logged.includes("peer link cut: its peer does not read"));
  await close(a);
  await deaf.close();
});
