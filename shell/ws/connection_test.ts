// The connection's own rules, against a raw TCP peer that completes the
// handshake and then does only what each test says.
import assert from "node:assert/strict";
import { connectWebSocket } from "./client.ts";
import type { WsEvents } from "./connection.ts";
import { acceptKey } from "./handshake.ts";
import { headEnd } from "../http1/syntax.ts";

type RawPeer = {
  url: string;
  /** The peer's side of the first connection, once its handshake is answered. */
  conn: Promise<Deno.Conn>;
  close(): void;
};

/** Answers one upgrade with a 101 and then leaves the socket to the test. */
function rawPeer(): RawPeer {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conn = (async () => {
    const c = await listener.accept();
    const buf = new Uint8Array(8192);
    let len = 0;
    while (headEnd(buf, 0, len) < 0) {
      const n = await c.read(buf.subarray(len));
      if (n === null) throw new Error("closed during the handshake");
      len += n;
    }
    const head = new TextDecoder().decode(buf.subarray(0, len));
    const key = /sec-websocket-key: *(\S+)/i.exec(head)![1]!;
    await c.write(new TextEncoder().encode(
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${
        acceptKey(key)
      }\r\n\r\n`,
    ));
    return c;
  })();
  return {
    url: `ws://127.0.0.1:${listener.addr.port}/`,
    conn,
    close: () => listener.close(),
  };
}

function closeWatch() {
  const closes: [number, string, boolean][] = [];
  let resolve = () => {};
  const closed = new Promise<void>((r) => resolve = r);
  let opened = () => {};
  const open = new Promise<void>((r) => opened = r);
  const events: WsEvents = {
    onOpen: () => opened(),
    onText: () => {},
    onBinary: () => {},
    onClose: (code, reason, clean) => {
      closes.push([code, reason, clean]);
      resolve();
    },
  };
  return { closes, closed, open, events };
}

/** Reads until the peer ends; what came, as bytes. */
async function readAll(conn: Deno.Conn): Promise<Uint8Array> {
  const parts: number[] = [];
  const buf = new Uint8Array(4096);
  for (;;) {
    const n = await conn.read(buf).catch(() => null);
    if (n === null) return new Uint8Array(parts);
    parts.push(...buf.subarray(0, n));
  }
}

Deno.test("a server that never answers our close frame is cut after the close timeout: 1006, not clean", async () => {
  const peer = rawPeer();
  const w = closeWatch();
  const c = connectWebSocket(
    peer.url,
    { maxPayload: 100, closeTimeoutMs: 200 },
    w.events,
  );
  await w.open;
  const conn = await peer.conn;
  c.close(1000, "done");
  assert.equal(c.state, "closing");
  // Our close frame came (masked: opcode 8, mask bit), then the cut.
  const got = await readAll(conn);
  assert.equal(got[0], 0x88);
  assert.equal(got[1]! & 0x80, 0x80);
  await w.closed;
  assert.deepEqual(w.closes, [[1006, "", false]]);
  conn.close();
  peer.close();
});

Deno.test("a server that ends the socket without a close frame is 1006; terminate reports once, on a later turn", async () => {
  const peer = rawPeer();
  const w = closeWatch();
  connectWebSocket(peer.url, { maxPayload: 100 }, w.events);
  await w.open;
  (await peer.conn).close();
  await w.closed;
  assert.deepEqual(w.closes, [[1006, "", false]]);
  peer.close();

  const peer2 = rawPeer();
  const w2 = closeWatch();
  const c = connectWebSocket(peer2.url, { maxPayload: 100 }, w2.events);
  await w2.open;
  let listened = 0;
  c.once("close", () => listened++);
  c.terminate();
  c.terminate();
  assert.deepEqual(w2.closes, []);
  await w2.closed;
  await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(w2.closes, [[1006, "", false]]);
  assert.equal(listened, 1);
  assert.equal(c.state, "closed");
  // The peer sees the socket end.
  await readAll(await peer2.conn);
  (await peer2.conn).close();
  peer2.close();
});

Deno.test("frames sent while connecting count in bufferedAmount, then leave in the first write after the handshake", async () => {
  const peer = rawPeer();
  const w = closeWatch();
  const c = connectWebSocket(peer.url, { maxPayload: 100 }, w.events);
  c.sendText("a".repeat(100));
  c.sendBinary(new Uint8Array(50));
  // Header (2 + 4 mask) and payload, each.
  assert.equal(c.bufferedAmount, 106 + 56);
  const conn = await peer.conn;
  await w.open;
  const buf = new Uint8Array(4096);
  let len = 0;
  while (len < 162) len += (await conn.read(buf.subarray(len)))!;
  assert.equal(len, 162);
  assert.equal(buf[0], 0x81);
  assert.equal(buf[106], 0x82);
  assert.equal(c.bufferedAmount, 0);
  c.terminate();
  conn.close();
  peer.close();
});
