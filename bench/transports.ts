// Issue 31, item 3: the transport candidates measured alone, before any is
// wired into the relay. Each candidate is the smallest thing that does one
// hop's socket work, run as its own process, and the CPU it spends per request
// or message is read from /proc (bench/e2e/cpu.ts) in interleaved rounds, so
// the ratios between candidates hold on a loaded machine.
//
//   deno run --allow-run --allow-net=127.0.0.1 --allow-read --allow-env bench/transports.ts [--rounds 3] [--requests 4000] [--only door,link,client]
//
// The client door (what answers the SDKs): a POST with a small JSON body,
// answered with a small JSON body, keep-alive, 8 concurrent clients (node:http
// agent in this process, the same for every candidate):
//   node-http   node:http's createServer (the server today)
//   deno-serve  Deno.serve
//   raw-listen  Deno.listen, HTTP/1.1 parsed by hand (head, Content-Length body)
//   node-net    node:net, HTTP/1.1 parsed by hand
// The worker's link (WebSocket client to the server; server here is `ws` in
// this process): 8 messages in flight, each echoed:
//   ws-client   the `ws` package's client (the worker before issue 31)
//   deno-ws     Deno's native WebSocket
//   ours        shell/ws/client.ts over Deno.connect, TCP_NODELAY (the worker now)
// and the latency of a head and a first piece sent in two turns (issue 31's
// Nagle finding): p50 from the first send to the server's answer to the
// second.
// The worker's backend client (HTTP/1.1 to the GPU server; the server here is
// node:net in this process): 8 keep-alive connections, each sending a POST and
// reading its answer in turn, CPU of the client process per request:
//   exchange    shell/worker/http1/exchange.ts, the worker's client itself
//   node-net    node:net, one write per request, http1/response_parser.ts
//   deno-conn   Deno.connect, the same parser, one reused read buffer, one
//               write per request
import http from "node:http";
import net from "node:net";
import process from "node:process";
import { parseArgs } from "node:util";
import { type WebSocket as WsSocket, WebSocketServer } from "ws";
import WebSocket from "ws";
import { readCpuNs } from "./e2e/cpu.ts";
import { freePort, spawnProgram } from "../shell/procs.ts";
import { median, percentile } from "./e2e/stats.ts";
import { postChat } from "./_post_chat.ts";
import { exchange } from "../shell/worker/http1/exchange.ts";
import { closeIdleConnections } from "../shell/worker/http1/connection_pool.ts";
import {
  feed,
  newResponseParser,
  type ParserEvents,
} from "../shell/worker/http1/response_parser.ts";
import { connectWebSocket } from "../shell/ws/client.ts";
import type { WsConnection } from "../shell/ws/connection.ts";

const ANSWER = JSON.stringify({
  id: "x",
  object: "chat.completion",
  choices: [{ index: 0, message: { role: "assistant", content: "a b c d e" } }],
});
const ANSWER_BYTES = new TextEncoder().encode(ANSWER);
const BODY = JSON.stringify({
  model: "m",
  messages: [{ role: "user", content: "hello there" }],
  max_tokens: 5,
});

// ---- the candidates, each run as a child: `transports.ts serve <kind> <port>`

function serveNodeHttp(port: number): void {
  http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => {
      JSON.parse(Buffer.concat(parts).toString("utf8"));
      res.writeHead(200, {
        "content-type": "application/json",
        "content-length": ANSWER_BYTES.length,
      });
      res.end(ANSWER_BYTES);
    });
  }).listen(port, "127.0.0.1");
}

function serveDeno(port: number): void {
  Deno.serve({ port, hostname: "127.0.0.1", onListen() {} }, async (req) => {
    JSON.parse(await req.text());
    return new Response(ANSWER_BYTES, {
      headers: { "content-type": "application/json" },
    });
  });
}

const HEAD_END = new Uint8Array([13, 10, 13, 10]);
const RESPONSE_HEAD = new TextEncoder().encode(
  `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${ANSWER_BYTES.length}\r\n\r\n`,
);
const RESPONSE = new Uint8Array(RESPONSE_HEAD.length + ANSWER_BYTES.length);
RESPONSE.set(RESPONSE_HEAD);
RESPONSE.set(ANSWER_BYTES, RESPONSE_HEAD.length);
const latin1 = new TextDecoder("latin1");
const utf8 = new TextDecoder();

function indexOf(buf: Uint8Array, from: number, to: number): number {
  for (let i = from; i + 3 < to; i++) {
    if (
      buf[i] === HEAD_END[0] && buf[i + 1] === HEAD_END[1] &&
      buf[i + 2] === HEAD_END[2] && buf[i + 3] === HEAD_END[3]
    ) return i;
  }
  return -1;
}

/**
 * Takes every complete request out of `buf[0..len)`; returns how many bytes
 * were used and how many requests were whole.
 */
function parseRequests(
  buf: Uint8Array,
  len: number,
): { used: number; count: number } {
  let at = 0;
  let count = 0;
  for (;;) {
    const end = indexOf(buf, at, len);
    if (end < 0) break;
    const head = latin1.decode(buf.subarray(at, end));
    const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
    const bodyLen = m === null ? 0 : Number(m[1]);
    if (end + 4 + bodyLen > len) break;
    JSON.parse(utf8.decode(buf.subarray(end + 4, end + 4 + bodyLen)));
    at = end + 4 + bodyLen;
    count++;
  }
  return { used: at, count };
}

function serveRaw(port: number): void {
  const listener = Deno.listen({ port, hostname: "127.0.0.1" });
  (async () => {
    for await (const conn of listener) {
      conn.setNoDelay(true);
      (async () => {
        let buf = new Uint8Array(64 * 1024);
        let len = 0;
        try {
          for (;;) {
            if (len === buf.length) {
              const bigger = new Uint8Array(buf.length * 2);
              bigger.set(buf);
              buf = bigger;
            }
            const n = await conn.read(buf.subarray(len));
            if (n === null) break;
            len += n;
            const { used, count } = parseRequests(buf, len);
            if (count === 0) continue;
            buf.copyWithin(0, used, len);
            len -= used;
            // One write per read, however many requests it held.
            if (count === 1) await conn.write(RESPONSE);
            else {
              const all = new Uint8Array(RESPONSE.length * count);
              for (let i = 0; i < count; i++) {
                all.set(RESPONSE, i * RESPONSE.length);
              }
              await conn.write(all);
            }
          }
        } catch {
          // The client left.
        } finally {
          try {
            conn.close();
          } catch {
            // Already closed.
          }
        }
      })();
    }
  })();
}

function serveNodeNet(port: number): void {
  net.createServer(serveSocket).listen(port, "127.0.0.1");
}

/** One keep-alive connection of the node:net door: each request answered as it is whole. */
function serveSocket(socket: net.Socket): void {
  onRequests(socket, (count) => {
    for (let i = 0; i < count; i++) socket.write(RESPONSE);
  });
}

/** Calls `answer` with how many requests each read made whole on `socket`. */
function onRequests(socket: net.Socket, answer: (count: number) => void) {
  socket.setNoDelay(true);
  let buf = new Uint8Array(64 * 1024);
  let len = 0;
  socket.on("data", (chunk: Buffer) => {
    while (len + chunk.length > buf.length) {
      const bigger = new Uint8Array(buf.length * 2);
      bigger.set(buf.subarray(0, len));
      buf = bigger;
    }
    buf.set(chunk, len);
    len += chunk.length;
    const { used, count } = parseRequests(buf, len);
    if (count === 0) return;
    buf.copyWithin(0, used, len);
    len -= used;
    answer(count);
  });
  socket.on("error", () => {});
}

/** A WebSocket client candidate: connects to `url`, echoes nothing, sends when told by the server. */
function linkWs(url: string): void {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  ws.on("message", (data: Buffer, isBinary: boolean) => {
    // The server asks for `n` messages back (n=1: an echo; "pair": two sends
    // in two turns, the Nagle probe).
    const text = isBinary ? data.toString() : data.toString();
    if (text === "pair") {
      ws.send("head-of-a-stream");
      setTimeout(() => ws.send("first-piece"), 0);
    } else ws.send(text);
  });
}

function linkDeno(url: string): void {
  const ws = new globalThis.WebSocket(url);
  ws.onmessage = (e) => {
    const text = String(e.data);
    if (text === "pair") {
      ws.send("head-of-a-stream");
      setTimeout(() => ws.send("first-piece"), 0);
    } else ws.send(text);
  };
}

// ---- backend client candidates, each run as a child:
// `transports.ts client <kind> <port> <requests>`: a warm-up of a quarter of
// `requests`, then `requests` at concurrency 8 with the process's own CPU
// read around them (every thread's, /proc/self/task/*/schedstat), printed as
// `cpu-ns <n>`.

type Client = "exchange" | "node-net" | "deno-conn";
const CLIENTS: Client[] = ["exchange", "node-net", "deno-conn"];
const CLIENT_CONCURRENCY = 8;

/** This process's CPU ns so far, every thread (getrusage). */
function ownCpuNs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) * 1000;
}

/** The answer's events, for a client that only needs to know it is whole. */
function untilComplete(done: () => void): ParserEvents {
  return { head() {}, body() {}, complete: done };
}

function requestWire(port: number): string {
  return `POST /v1/chat/completions HTTP/1.1\r\ncontent-type: application/json\r\n` +
    `content-length: ${BODY.length}\r\nHost: 127.0.0.1:${port}\r\n` +
    `Connection: keep-alive\r\n\r\n${BODY}`;
}

/** One request at a time on a connection of its own; `send` resolves when the answer is whole. */
type Lane = { send(): Promise<void>; close(): void };

async function laneNodeNet(port: number): Promise<Lane> {
  const socket = net.connect({ host: "127.0.0.1", port });
  socket.setNoDelay(true);
  await new Promise((r) => socket.once("connect", r));
  const wire = requestWire(port);
  let parser = newResponseParser();
  let whole = () => {};
  const events = untilComplete(() => whole());
  socket.on("data", (b: Buffer) => feed(parser, b, events));
  return {
    send: () =>
      new Promise<void>((resolve) => {
        parser = newResponseParser();
        whole = resolve;
        socket.write(wire);
      }),
    close: () => socket.destroy(),
  };
}

async function laneDenoConn(port: number): Promise<Lane> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  conn.setNoDelay(true);
  const wire = new TextEncoder().encode(requestWire(port));
  const buf = Buffer.allocUnsafe(64 * 1024);
  return {
    send: async () => {
      const parser = newResponseParser();
      let whole = false;
      const events = untilComplete(() => whole = true);
      const written = writeAll(conn, wire);
      while (!whole) {
        const n = await conn.read(buf);
        if (n === null) throw new Error("the server closed the connection");
        feed(parser, buf.subarray(0, n), events);
      }
      await written;
    },
    close: () => conn.close(),
  };
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  for (let at = 0; at < bytes.length;) {
    at += await conn.write(at === 0 ? bytes : bytes.subarray(at));
  }
}

/** The worker's own client; its pool keeps the 8 connections. */
function laneExchange(port: number): Lane {
  const target = {
    host: "127.0.0.1",
    port,
    path: "/v1/chat/completions",
    auth: null,
  };
  const headers = {
    "content-type": "application/json",
    "content-length": String(BODY.length),
  };
  return {
    send: () =>
      new Promise<void>((resolve, reject) => {
        exchange("POST", target, headers, BODY, {
          response() {},
          data() {},
          end: resolve,
          failed: (_, message) => reject(new Error(message)),
        });
      }),
    close: () => closeIdleConnections(),
  };
}

async function runClient(kind: Client, port: number, requests: number) {
  const lanes = await Promise.all(
    Array.from(
      { length: CLIENT_CONCURRENCY },
      () =>
        kind === "exchange"
          ? laneExchange(port)
          : kind === "node-net"
          ? laneNodeNet(port)
          : laneDenoConn(port),
    ),
  );
  const run = async (n: number) => {
    let next = 0;
    await Promise.all(lanes.map(async (lane) => {
      while (next++ < n) await lane.send();
    }));
  };
  await run(requests / 4);
  const before = ownCpuNs();
  await run(requests);
  console.log(`cpu-ns ${ownCpuNs() - before}`);
  for (const lane of lanes) lane.close();
}

function linkOurs(url: string): void {
  const ws: WsConnection = connectWebSocket(url, { maxPayload: 1 << 20 }, {
    onText: (text) => {
      if (text === "pair") {
        ws.sendText("head-of-a-stream");
        setTimeout(() => ws.sendText("first-piece"), 0);
      } else ws.sendText(text);
    },
    onBinary: () => {},
    onClose: () => {},
  });
}

// ---- the harness

type Door = "node-http" | "deno-serve" | "raw-listen" | "node-net";
type Link = "ws-client" | "deno-ws" | "ours";
const DOORS: Door[] = ["node-http", "deno-serve", "raw-listen", "node-net"];
const LINKS: Link[] = ["ws-client", "deno-ws", "ours"];

function cpuNs(pid: number): number {
  const t = readCpuNs([pid]).get(pid);
  if (t === undefined) throw new Error(`process ${pid} is gone`);
  return t;
}

async function waitPort(port: number): Promise<void> {
  for (let i = 0; i < 300; i++) {
    try {
      (await Deno.connect({ port, hostname: "127.0.0.1" })).close();
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  throw new Error(`nothing listens on ${port}`);
}

function self(args: string[]) {
  return spawnProgram({
    name: args[1]!,
    program: Deno.execPath(),
    args: [
      "run",
      "--allow-net=127.0.0.1",
      // `ws` reads WS_NO_BUFFER_UTIL and WS_NO_UTF_8_VALIDATE.
      "--allow-env",
      new URL(import.meta.url).pathname,
      ...args,
    ],
    linesKept: 20,
  });
}

/** `requests` POSTs at concurrency 8 through one keep-alive agent. */
async function drive(port: number, requests: number): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  let next = 0;
  const one = () =>
    postChat<void>(port, agent, BODY, (res, resolve, reject) => {
      const parts: Buffer[] = [];
      res.on("data", (c: Buffer) => parts.push(c));
      res.on("end", () => {
        if (Buffer.concat(parts).toString() !== ANSWER) {
          reject(new Error("wrong answer"));
        } else resolve();
      });
    });
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next++ < requests) await one();
    }),
  );
  agent.destroy();
}

async function doors(rounds: number, requests: number) {
  const procs = DOORS.map((d) => {
    const port = freePort();
    return { door: d, port, child: self(["serve", d, String(port)]) };
  });
  const us: Record<Door, number[]> = {
    "node-http": [],
    "deno-serve": [],
    "raw-listen": [],
    "node-net": [],
  };
  try {
    for (const p of procs) {
      await waitPort(p.port);
      await drive(p.port, requests / 4); // warm-up
    }
    for (let r = 0; r < rounds; r++) {
      for (let i = 0; i < procs.length; i++) {
        const p = procs[(i + r) % procs.length]!;
        const before = cpuNs(p.child.pid);
        await drive(p.port, requests);
        us[p.door].push((cpuNs(p.child.pid) - before) / 1000 / requests);
      }
    }
  } finally {
    for (const p of procs) await p.child.stop(2000);
  }
  return us;
}

async function links(rounds: number, messages: number) {
  const wss = new WebSocketServer({ port: 0, host: "127.0.0.1" });
  await new Promise((r) => wss.once("listening", r));
  const port = (wss.address() as { port: number }).port;
  const sockets: WsSocket[] = [];
  wss.on("connection", (s: WsSocket) => {
    s.binaryType = "nodebuffer";
    sockets.push(s);
  });
  const procs: { link: Link; child: ReturnType<typeof self>; s: WsSocket }[] =
    [];
  for (const l of LINKS) {
    const child = self(["link", l, `ws://127.0.0.1:${port}/`]);
    const have = sockets.length;
    for (let i = 0; i < 300 && sockets.length === have; i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    if (sockets.length === have) throw new Error(`${l} did not connect`);
    procs.push({ link: l, child, s: sockets[sockets.length - 1]! });
  }
  /** `n` echoes with 8 in flight. */
  const echoes = (s: WsSocket, n: number) =>
    new Promise<void>((resolve) => {
      let sent = 0;
      let got = 0;
      const onMessage = () => {
        got++;
        if (got === n) {
          s.off("message", onMessage);
          resolve();
        } else if (sent < n) {
          sent++;
          s.send('{"type":"chunk","request_id":"r-1","data":"a b c"}');
        }
      };
      s.on("message", onMessage);
      for (; sent < Math.min(8, n); sent++) {
        s.send('{"type":"chunk","request_id":"r-1","data":"a b c"}');
      }
    });
  /** ms from asking for a head and a first piece until the piece arrives. */
  const pair = (s: WsSocket) =>
    new Promise<number>((resolve) => {
      const t0 = performance.now();
      let got = 0;
      const onMessage = () => {
        if (++got === 2) {
          s.off("message", onMessage);
          resolve(performance.now() - t0);
        }
      };
      s.on("message", onMessage);
      s.send("pair");
    });
  const us: Record<Link, number[]> = {
    "ws-client": [],
    "deno-ws": [],
    ours: [],
  };
  const pairMs: Record<Link, number[]> = {
    "ws-client": [],
    "deno-ws": [],
    ours: [],
  };
  try {
    for (const p of procs) await echoes(p.s, messages / 4);
    for (let r = 0; r < rounds; r++) {
      for (let i = 0; i < procs.length; i++) {
        const p = procs[(i + r) % procs.length]!;
        const before = cpuNs(p.child.pid);
        await echoes(p.s, messages);
        us[p.link].push((cpuNs(p.child.pid) - before) / 1000 / messages);
        for (let k = 0; k < 20; k++) pairMs[p.link].push(await pair(p.s));
      }
    }
  } finally {
    for (const p of procs) await p.child.stop(2000);
    wss.close();
  }
  return { us, pairMs };
}

/** Server CPU is not measured here: node:net in this process answers them all. */
/** Pieces of a streamed answer (`--only client`'s second half). */
const STREAM_PIECES = 20;
const STREAM_HEAD =
  "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
const STREAM_PIECE = (() => {
  const event = 'data: {"choices":[{"delta":{"content":"a"}}]}\n\n';
  return `${event.length.toString(16)}\r\n${event}\r\n`;
})();

/**
 * Answers each request with an SSE stream of STREAM_PIECES events, one write
 * per event-loop turn, so a client reads them one by one (per-read cost).
 */
function serveStream(socket: net.Socket): void {
  onRequests(socket, (count) => {
    for (let i = 0; i < count; i++) {
      socket.write(STREAM_HEAD);
      let sent = 0;
      const next = () => {
        if (socket.destroyed) return;
        if (sent++ < STREAM_PIECES) {
          socket.write(STREAM_PIECE);
          setImmediate(next);
        } else socket.write("0\r\n\r\n");
      };
      setImmediate(next);
    }
  });
}

async function clients(
  rounds: number,
  requests: number,
  answer: "plain" | "stream",
) {
  const server = net.createServer(
    answer === "plain" ? serveSocket : serveStream,
  );
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  const us: Record<Client, number[]> = {
    exchange: [],
    "node-net": [],
    "deno-conn": [],
  };
  try {
    for (let r = 0; r < rounds; r++) {
      for (let i = 0; i < CLIENTS.length; i++) {
        const kind = CLIENTS[(i + r) % CLIENTS.length]!;
        const child = self(["client", kind, String(port), String(requests)]);
        const m = await child.waitForLine(/^cpu-ns (\d+)$/, 120_000);
        await child.status;
        us[kind].push(Number(m[1]) / 1000 / requests);
      }
    }
  } finally {
    server.close();
  }
  return us;
}

if (import.meta.main) {
  const [mode, kind, arg] = Deno.args;
  if (mode === "serve") {
    const port = Number(arg);
    switch (kind as Door) {
      case "node-http":
        serveNodeHttp(port);
        break;
      case "deno-serve":
        serveDeno(port);
        break;
      case "raw-listen":
        serveRaw(port);
        break;
      case "node-net":
        serveNodeNet(port);
        break;
    }
  } else if (mode === "client") {
    await runClient(kind as Client, Number(arg), Number(Deno.args[3]));
    Deno.exit(0);
  } else if (mode === "link") {
    if (kind === "ws-client") linkWs(arg!);
    else if (kind === "ours") linkOurs(arg!);
    else linkDeno(arg!);
  } else {
    const { values } = parseArgs({
      args: Deno.args,
      options: {
        rounds: { type: "string", default: "3" },
        requests: { type: "string", default: "4000" },
        only: { type: "string", default: "door,link,client" },
      },
    });
    const rounds = Number(values.rounds);
    const requests = Number(values.requests);
    const only = values.only.split(",");
    if (only.includes("door")) await reportDoors(rounds, requests);
    if (only.includes("link")) await reportLinks(rounds, requests);
    if (only.includes("client")) await printClients(rounds, requests);
    Deno.exit(0);
  }
}

async function printClients(rounds: number, requests: number) {
  for (const answer of ["plain", "stream"] as const) {
    const n = answer === "plain" ? requests : requests / 4;
    const c = await clients(rounds, n, answer);
    console.log(
      answer === "plain"
        ? `backend client: client CPU µs per plain request, c=8, ${n} requests, ${rounds} rounds (median; rounds)`
        : `backend client: client CPU µs per streamed request (${STREAM_PIECES} events, one per turn), c=8, ${n} requests`,
    );
    const base = median(c.exchange);
    for (const k of CLIENTS) {
      console.log(
        `  ${k.padEnd(11)} ${median(c[k]).toFixed(1).padStart(6)} µs  (${
          (median(c[k]) / base).toFixed(2)
        } of exchange)  [${c[k].map((v) => v.toFixed(1)).join(", ")}]`,
      );
    }
  }
}

async function reportDoors(rounds: number, requests: number): Promise<void> {
  const d = await doors(rounds, requests);
  console.log(
    `client door: server CPU µs per request, c=8, ${requests} requests, ${rounds} rounds (median; rounds)`,
  );
  const base = median(d["node-http"]);
  for (const k of DOORS) {
    console.log(
      `  ${k.padEnd(11)} ${median(d[k]).toFixed(1).padStart(6)} µs  (${
        (median(d[k]) / base).toFixed(2)
      } of node-http)  [${d[k].map((v) => v.toFixed(1)).join(", ")}]`,
    );
  }
}

async function reportLinks(rounds: number, requests: number): Promise<void> {
  const l = await links(rounds, requests);
  console.log(
    `worker link: client CPU µs per message echoed, 8 in flight, ${requests} messages (median; rounds); head + first piece in two turns, p50 / p99 ms`,
  );
  for (const k of LINKS) {
    console.log(
      `  ${k.padEnd(11)} ${median(l.us[k]).toFixed(1).padStart(6)} µs  [${
        l.us[k].map((v) => v.toFixed(1)).join(", ")
      }]   pair p50 ${percentile(l.pairMs[k], 50).toFixed(2)} ms, p99 ${
        percentile(l.pairMs[k], 99).toFixed(2)
      } ms`,
    );
  }
}
