// Our WebSocket against the `ws` package, on real loopback sockets: our client
// with a `ws` server, a `ws` client with our server (over a Deno.Conn and over
// node:http's upgrade socket). The wire must be plain RFC 6455, as a Rust
// worker or server (tokio-tungstenite) speaks it.
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
// @ts-types="npm:@types/ws@8.18.1"
import WebSocket, { WebSocketServer } from "ws";
import { acceptOn } from "./accept.ts";
import { connectWebSocket } from "./client.ts";
import type { WsConnection, WsEvents } from "./connection.ts";
import { headEnd } from "../http1/syntax.ts";
import { connTransport, type Transport } from "./transport.ts";
import { type UpgradeHead, upgradeOnConn } from "./upgrade.ts";

/** What a connection reported, and promises for its open and close. */
function recorder() {
  const texts: string[] = [];
  const binaries: Uint8Array[] = [];
  let opened = () => {};
  let closedWith = (_: { code: number; reason: string; clean: boolean }) => {};
  const open = new Promise<void>((r) => opened = r);
  const closed = new Promise<{ code: number; reason: string; clean: boolean }>(
    (r) => closedWith = r,
  );
  let wanted = 0;
  let onCount = () => {};
  const events: WsEvents = {
    onOpen: () => opened(),
    onText: (t) => {
      texts.push(t);
      if (texts.length + binaries.length === wanted) onCount();
    },
    onBinary: (b) => {
      binaries.push(b);
      if (texts.length + binaries.length === wanted) onCount();
    },
    onClose: (code, reason, clean) => closedWith({ code, reason, clean }),
  };
  /** Resolves once `n` messages in all have come. */
  const count = (n: number) =>
    new Promise<void>((r) => {
      wanted = n;
      onCount = r;
      if (texts.length + binaries.length >= n) r();
    });
  return { texts, binaries, open, closed, events, count };
}

async function wsServer(
  opts: ConstructorParameters<typeof WebSocketServer>[0] = {},
) {
  const wss = new WebSocketServer({
    port: 0,
    host: "127.0.0.1",
    perMessageDeflate: false,
    ...opts,
  });
  await new Promise((r) => wss.once("listening", r));
  const port = (wss.address() as AddressInfo).port;
  const next = () =>
    new Promise<WebSocket>((r) => wss.once("connection", (s) => r(s)));
  return { wss, url: `ws://127.0.0.1:${port}/path?q=1`, next };
}

function closeOf(s: WebSocket): Promise<{ code: number; reason: string }> {
  return new Promise((r) =>
    s.once("close", (code, reason) => r({ code, reason: reason.toString() }))
  );
}

Deno.test("our client and a ws server exchange text and binary messages of every size, both ways", async () => {
  const { wss, url, next } = await wsServer();
  const serverSide = next();
  const rec = recorder();
  const c = connectWebSocket(url, { maxPayload: 1 << 20 }, rec.events);
  // Sent while connecting: they leave right after the handshake.
  c.sendText("early");
  const s = await serverSide;
  s.on("message", (data, isBinary) => s.send(data, { binary: isBinary }));
  await rec.open;
  const big = new Uint8Array(100_000).map((_, i) => i);
  c.sendText("héllo ✓");
  c.sendBinary(big);
  c.sendText("x".repeat(70_000));
  c.sendBinaryWith(3, (into) => into.set([7, 8, 9]));
  await rec.count(5);
  assert.deepEqual(rec.texts, ["early", "héllo ✓", "x".repeat(70_000)]);
  assert.deepEqual(rec.binaries, [big, new Uint8Array([7, 8, 9])]);
  const serverClosed = closeOf(s);
  c.close(4001, "bye");
  assert.deepEqual(await serverClosed, { code: 4001, reason: "bye" });
  assert.deepEqual(await rec.closed, {
    code: 4001,
    reason: "bye",
    clean: true,
  });
  assert.equal(c.state, "closed");
  wss.close();
});

Deno.test("our client reassembles a ws server's fragmented message, answers its ping, and reads its close", async () => {
  const { wss, url, next } = await wsServer();
  const serverSide = next();
  const rec = recorder();
  const c = connectWebSocket(url, { maxPayload: 1 << 20 }, rec.events);
  const s = await serverSide;
  await rec.open;
  const pong = new Promise<string>((r) =>
    s.once("pong", (d: Buffer) => r(d.toString()))
  );
  s.send("frag", { fin: false });
  s.ping("are you there");
  s.send("ment", { fin: true });
  assert.equal(await pong, "are you there");
  await rec.count(1);
  assert.deepEqual(rec.texts, ["fragment"]);
  s.close(4002, "go away");
  assert.deepEqual(await rec.closed, {
    code: 4002,
    reason: "go away",
    clean: true,
  });
  assert.equal(c.bufferedAmount, 0);
  wss.close();
});

Deno.test("our client closes with 1009 a message over its maxPayload", async () => {
  const { wss, url, next } = await wsServer();
  const serverSide = next();
  const rec = recorder();
  connectWebSocket(url, { maxPayload: 1000 }, rec.events);
  const s = await serverSide;
  await rec.open;
  const serverClosed = closeOf(s);
  s.send("y".repeat(1001));
  assert.equal((await serverClosed).code, 1009);
  assert.equal((await rec.closed).code, 1009);
  wss.close();
});

Deno.test("our client's headers and query reach the server; a refused handshake closes 1006 without opening", async () => {
  const seen: { url: string; secret: string | undefined }[] = [];
  const { wss, url } = await wsServer({
    verifyClient: (info, done) => {
      seen.push({
        url: info.req.url ?? "",
        secret: info.req.headers["x-worker-secret"] as string | undefined,
      });
      done(false, 401);
    },
  });
  const rec = recorder();
  let opened = false;
  connectWebSocket(url, {
    maxPayload: 100,
    headers: { "X-Worker-Secret": "s3cret" },
  }, { ...rec.events, onOpen: () => opened = true });
  const closed = await rec.closed;
  assert.equal(closed.code, 1006);
  assert.match(closed.reason, /401/);
  assert.equal(closed.clean, false);
  assert.equal(opened, false);
  assert.deepEqual(seen, [{ url: "/path?q=1", secret: "s3cret" }]);
  wss.close();
  // Nothing listens: also 1006, with the reason.
  const none = recorder();
  connectWebSocket(url, { maxPayload: 100 }, none.events);
  assert.equal((await none.closed).code, 1006);
});

// ---- our server

/** What a door knows of a request, for a test without a cap or proxies. */
function doorHead(
  method: string,
  url: string,
  headers: Record<string, string>,
): UpgradeHead {
  return {
    method,
    url,
    headers,
    clientIp: "127.0.0.1",
    overCap: () => false,
    exempt: () => {},
  };
}

/** The request head read from `conn` by hand (what the client door will hand over). */
async function readUpgrade(
  conn: Deno.Conn,
): Promise<{ head: UpgradeHead; leftover: Uint8Array }> {
  const buf = new Uint8Array(16 * 1024);
  let len = 0;
  for (;;) {
    const n = await conn.read(buf.subarray(len));
    if (n === null) throw new Error("closed before the head");
    len += n;
    const end = headEnd(buf, 0, len);
    if (end < 0) continue;
    const [line, ...lines] = new TextDecoder().decode(buf.subarray(0, end - 4))
      .split("\r\n");
    const [method, url] = line!.split(" ");
    const headers: Record<string, string> = {};
    for (const l of lines) {
      const colon = l.indexOf(":");
      headers[l.slice(0, colon).trim().toLowerCase()] = l.slice(colon + 1)
        .trim();
    }
    return {
      head: doorHead(method!, url!, headers),
      leftover: buf.slice(end, len),
    };
  }
}

/** A Deno.listen server that accepts every upgrade with our code. */
function denoServer(
  onConnection: (c: WsConnection, rec: ReturnType<typeof recorder>) => void,
  opts: { maxPayload: number; wrap?: (t: Transport) => Transport } = {
    maxPayload: 1 << 20,
  },
) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  (async () => {
    for await (const conn of listener) {
      const { head, leftover } = await readUpgrade(conn);
      const rec = recorder();
      const c = opts.wrap === undefined
        ? upgradeOnConn(head, conn, leftover).accept(opts, rec.events)
        : acceptOn(
          head,
          opts.wrap(connTransport(conn)),
          leftover,
          opts,
          rec.events,
        );
      if (c !== null) onConnection(c, rec);
    }
  })().catch(() => {});
  return {
    url: `ws://127.0.0.1:${listener.addr.port}/`,
    close: () => listener.close(),
  };
}

function wsClient(url: string, opts: WebSocket.ClientOptions = {}) {
  const ws = new WebSocket(url, { perMessageDeflate: false, ...opts });
  const messages: (string | Buffer)[] = [];
  ws.on(
    "message",
    (d: Buffer, isBinary) => messages.push(isBinary ? d : d.toString()),
  );
  const open = new Promise<void>((r, j) => {
    ws.once("open", () => r());
    ws.once("error", j);
  });
  return { ws, messages, open, closed: closeOf(ws) };
}

async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((r) => setTimeout(r, 5));
}

Deno.test("a ws client and our server (Deno.Conn) exchange messages, fragments and pings; closes carry codes both ways", async () => {
  let server: { c: WsConnection; rec: ReturnType<typeof recorder> } | null =
    null;
  const srv = denoServer((c, rec) => {
    server = { c, rec };
    rec.events.onText = (t) => {
      rec.texts.push(t);
      c.sendText(`echo ${t}`);
    };
  });
  const cl = wsClient(srv.url);
  await cl.open;
  await until(() => server !== null);
  const { c, rec } = server!;
  cl.ws.send("one");
  cl.ws.send("fr", { fin: false });
  cl.ws.send("ag", { fin: true });
  cl.ws.send(new Uint8Array([1, 2, 3]));
  const pong = new Promise<string>((r) =>
    cl.ws.once("pong", (d: Buffer) => r(d.toString()))
  );
  cl.ws.ping("p");
  assert.equal(await pong, "p");
  await until(() => cl.messages.length === 2 && rec.binaries.length === 1);
  assert.deepEqual(cl.messages, ["echo one", "echo frag"]);
  assert.deepEqual(rec.binaries, [new Uint8Array([1, 2, 3])]);
  c.close(4004, "server says bye");
  assert.deepEqual(await cl.closed, { code: 4004, reason: "server says bye" });
  assert.deepEqual(await rec.closed, {
    code: 4004,
    reason: "server says bye",
    clean: true,
  });
  // And the other way.
  server = null;
  const cl2 = wsClient(srv.url);
  await cl2.open;
  await until(() => server !== null);
  cl2.ws.close(4005, "client says bye");
  assert.deepEqual(await server!.rec.closed, {
    code: 4005,
    reason: "client says bye",
    clean: true,
  });
  assert.equal((await cl2.closed).code, 4005);
  srv.close();
});

Deno.test("our server closes with 1009 a message over its maxPayload, and frames of one turn leave in one write, a promise chain's too", async () => {
  const writes: number[] = [];
  const counting = (t: Transport): Transport => ({
    read: (onData, onEnd) => t.read(onData, onEnd),
    write: (b) => {
      writes.push(b.length);
      return t.write(b);
    },
    closeWrite: () => t.closeWrite(),
    close: () => t.close(),
  });
  let server: WsConnection | null = null;
  const srv = denoServer((c) => server = c, {
    maxPayload: 1000,
    wrap: counting,
  });
  const cl = wsClient(srv.url);
  await cl.open;
  await until(() => server !== null);
  // The 101 went in a write of its own (nothing was queued with it).
  assert.equal(writes.length, 1);
  for (let i = 0; i < 50; i++) server!.sendText(`m${i}`);
  assert.ok(server!.bufferedAmount >= 50 * 4);
  await until(() => cl.messages.length === 50);
  assert.equal(writes.length, 2, `writes: ${writes}`);
  assert.equal(server!.bufferedAmount, 0);
  // Frames sent step by step by a promise chain within one turn (a stream
  // reader handing chunks on through microtasks) still share one write.
  await (async () => {
    for (let i = 0; i < 5; i++) {
      server!.sendText(`p${i}`);
      await Promise.resolve();
      await null;
    }
  })();
  await until(() => cl.messages.length === 55);
  assert.equal(writes.length, 3, `writes: ${writes}`);
  cl.ws.send("z".repeat(1001));
  assert.equal((await cl.closed).code, 1009);
  srv.close();
});

Deno.test("our server answers 400 to a request that is not an upgrade, and 1002 to an unmasked frame", async () => {
  const srv = denoServer(() => {});
  const port = Number(new URL(srv.url).port);
  const read = async (conn: Deno.Conn) => {
    const out: number[] = [];
    const buf = new Uint8Array(4096);
    for (;;) {
      const n = await conn.read(buf).catch(() => null);
      // Byte for byte (TextDecoder's "latin1" is windows-1252).
      if (n === null) return String.fromCharCode(...out);
      out.push(...buf.subarray(0, n));
    }
  };
  const bad = await Deno.connect({ hostname: "127.0.0.1", port });
  await bad.write(new TextEncoder().encode(
    "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n",
  ));
  assert.match(await read(bad), /^HTTP\/1\.1 400 .*Sec-WebSocket-Key/s);
  bad.close();
  const raw = await Deno.connect({ hostname: "127.0.0.1", port });
  await raw.write(new TextEncoder().encode(
    "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
  ));
  // An unmasked text frame "hi", right behind the head.
  await raw.write(new Uint8Array([0x81, 0x02, 0x68, 0x69]));
  const got = await read(raw);
  assert.match(got, /^HTTP\/1\.1 101 .*s3pPLMBiTxaQ9kYGzzhZRbK\+xOo=/s);
  const frame = got.slice(got.indexOf("\r\n\r\n") + 4);
  assert.equal(frame.charCodeAt(0), 0x88);
  assert.equal((frame.charCodeAt(2) << 8) | frame.charCodeAt(3), 1002);
  raw.close();
  srv.close();
});

Deno.test("a held upgrade on a Deno.Conn notices its socket's close before an answer, and reply answers and ends", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = listener.addr.port;
  const held = async () => {
    const conn = await listener.accept();
    const { head, leftover } = await readUpgrade(conn);
    return upgradeOnConn(head, conn, leftover);
  };
  const request = new TextEncoder().encode(
    "GET /x HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
  );
  const left = await Deno.connect({ hostname: "127.0.0.1", port });
  await left.write(request);
  const u = await held();
  const gone = new Promise<void>((r) => u.onGone(r));
  left.close();
  await gone;
  const asked = await Deno.connect({ hostname: "127.0.0.1", port });
  await asked.write(request);
  (await held()).reply("HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
  const buf = new Uint8Array(1024);
  let got = "";
  for (;;) {
    const n = await asked.read(buf);
    if (n === null) break;
    got += new TextDecoder().decode(buf.subarray(0, n));
  }
  assert.match(got, /^HTTP\/1\.1 404 Not Found\r\n/);
  asked.close();
  listener.close();
});

Deno.test("large messages on several connections at once, turn after turn, each arrive as sent (write buffers are reused)", async () => {
  // Frames larger than the buffer a connection keeps go out of buffers kept
  // for any connection, turn after turn: a buffer handed on with the wrong
  // bytes, or while still in use, would mix two connections' messages. The
  // readers are paused while everything is sent (on loopback the sockets'
  // buffers take it all the same, so writes rarely wait).
  const { wss, url, next } = await wsServer({ maxPayload: 1 << 22 });
  const message = (conn: number, turn: number, size: number) =>
    `${conn}-${turn}-` +
    String.fromCharCode(97 + (conn * 5 + turn) % 26).repeat(size);
  const sizes = [3_000, 40_000, 9_000, 120_000, 5_000, 200_000, 7_000]
    .flatMap((size) => [size, size, size, size]);
  const want = (conn: number) =>
    sizes.flatMap((size, turn) => [
      message(conn, turn, size),
      message(conn, turn + 100, size >> 1),
    ]);
  // Connected one at a time, so each client is paired with its server side.
  const pairs = [];
  for (let conn = 0; conn < 3; conn++) {
    const serverSide = next();
    const rec = recorder();
    const c = connectWebSocket(url, { maxPayload: 1 << 22 }, rec.events);
    await rec.open;
    const s = await serverSide;
    const got: string[] = [];
    const all = new Promise<void>((resolve) =>
      s.on("message", (data) => {
        got.push(data.toString());
        if (got.length === sizes.length * 2) resolve();
      })
    );
    s.pause();
    pairs.push({ conn, c, rec, s, got, all });
  }
  await Promise.all(pairs.map(async ({ conn, c }) => {
    for (let turn = 0; turn < sizes.length; turn++) {
      c.sendText(message(conn, turn, sizes[turn]!));
      c.sendText(message(conn, turn + 100, sizes[turn]! >> 1));
      await new Promise((r) => setTimeout(r, 0));
    }
  }));
  for (const { s } of pairs) s.resume();
  for (const { conn, c, rec, s, got, all } of pairs) {
    await all;
    const expected = want(conn);
    // Compared without printing megabytes when they differ.
    assert.equal(got.length, expected.length);
    for (let i = 0; i < expected.length; i++) {
      assert.ok(got[i] === expected[i], `connection ${conn}, message ${i}`);
    }
    const closed = closeOf(s);
    c.close(1000, "");
    await closed;
    await rec.closed;
  }
  wss.close();
});

Deno.test("large messages to several of our clients at once each arrive as sent (read buffers are reused)", async () => {
  // A message over the small read buffer is read into a large one, kept for
  // any connection once let go: one shared while another connection's read
  // was pending would mix their bytes.
  const { wss, url, next } = await wsServer();
  const message = (conn: number, i: number) =>
    `${conn}-${i}-` +
    String.fromCharCode(97 + (conn * 3 + i) % 26).repeat(
      [2_000, 70_000, 500, 9_000][i % 4]!,
    );
  const pairs = [];
  for (let conn = 0; conn < 3; conn++) {
    const serverSide = next();
    const rec = recorder();
    const c = connectWebSocket(url, { maxPayload: 1 << 20 }, rec.events);
    await rec.open;
    pairs.push({ conn, c, rec, s: await serverSide });
  }
  const count = 24;
  for (let i = 0; i < count; i++) {
    for (const { conn, s } of pairs) s.send(message(conn, i));
  }
  for (const { conn, c, rec, s } of pairs) {
    // Mixed bytes can also fail the connection (a broken frame): then it
    // closes before its messages are all in.
    await Promise.race([rec.count(count), rec.closed]);
    assert.equal(c.state, "open", `${conn}: the connection failed`);
    assert.equal(rec.texts.length, count);
    for (let i = 0; i < count; i++) {
      // Compared without printing the messages when they differ.
      assert.ok(rec.texts[i] === message(conn, i), `${conn}: message ${i}`);
    }
    const closed = closeOf(s);
    c.close(1000, "");
    await closed;
    await rec.closed;
  }
  wss.close();
});
