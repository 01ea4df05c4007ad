// Issue 31, third round: the worker's whole path per plain request (its link's
// WebSocket, the core's decode, decide and encode, the backend client, the
// answer reader, usage counting) counted in instructions rather than time, for
// cuts of a few percent that CPU time on this shared machine cannot resolve
// (bench/README.md, "Worker instructions per request (issue 31, third
// round)"). The worker's twin of bench/instructions_probe.ts.
//
// One process: a fake server (Deno.serve's native WebSocket speaking the wire
// protocol: it acks the worker's register, sends `request` frames and reads
// `response_complete`), a fake backend (Deno.listen, raw HTTP/1.1 keep-alive,
// answering every chat completion with the same llama-server-like body), and a
// checkout's worker started in-process by its own `startWorker` with its own
// logger at LOG_LEVEL=info. The server keeps CONCURRENCY requests in flight
// until `count` are answered. Run it under valgrind twice per checkout, with
// few and with many requests; the difference over the difference in requests
// is the instructions of one request (worker, fake server and fake backend
// together; the last two are this file's, the same for every checkout):
//
//   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//     --smc-check=all-non-file deno run -A --config deno.json \
//     bench/worker_instructions_probe.ts <checkout> <count>
//
// `Collected :` in valgrind's summary is the count. The server acks only the
// extensions that shape a request's path, not capabilities-v1 or residency-v1:
// those run on the wall clock (a probe every 5 s, residency reads after
// answers, folded by time), which valgrind stretches, so they would add work
// with the run's duration rather than its requests.
import { chatCompletionBody } from "./_fixtures.ts";

const [root = ".", countArg = "500"] = Deno.args;
const count = Number(countArg);
const CONCURRENCY = 4;
const TIMED_EXTENSIONS = new Set(["capabilities-v1", "residency-v1"]);

type WorkerConfigLike = Record<string, unknown>;
type WorkerHelpers = {
  testConfig(
    proxyUrl: string,
    backendUrl: string,
    over: WorkerConfigLike,
  ): WorkerConfigLike;
};
type Connection = {
  startWorker(
    config: WorkerConfigLike,
    models: string[],
    deps: {
      log: (level: string, message: string, fields?: unknown) => void;
      random: () => number;
    },
  ): { done: Promise<number> };
};
type Log = {
  makeLogger(
    level: string,
    format: string,
    name: string,
  ): (level: string, message: string, fields?: unknown) => void;
};

const base = new URL(`${root.replace(/\/$/, "")}/`, `file://${Deno.cwd()}/`);
const helpers: WorkerHelpers = await import(
  new URL("shell/worker/_test_worker.ts", base).href
);
const connection: Connection = await import(
  new URL("shell/worker/connection.ts", base).href
);
const logging: Log = await import(new URL("shell/log.ts", base).href);

// ---- the fake backend: raw HTTP/1.1, keep-alive, one answer for every POST ----
const answerBody = new TextEncoder().encode(chatCompletionBody("m1"));
const okHead = new TextEncoder().encode(
  "HTTP/1.1 200 OK\r\ncontent-type: application/json; charset=utf-8\r\n" +
    "server: llama.cpp\r\naccess-control-allow-origin: \r\n" +
    `keep-alive: timeout=5, max=100000\r\ncontent-length: ${answerBody.length}\r\n\r\n`,
);
const okAnswer = new Uint8Array(okHead.length + answerBody.length);
okAnswer.set(okHead);
okAnswer.set(answerBody, okHead.length);
const notFound = new TextEncoder().encode(
  "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
);
const latin1 = new TextDecoder("latin1");

/** Answers requests on one connection: POST gets the completion, anything else 404. */
async function serveBackend(conn: Deno.Conn): Promise<void> {
  const buf = new Uint8Array(65536);
  let held = "";
  try {
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) return;
      held += latin1.decode(buf.subarray(0, n));
      for (;;) {
        const headEnd = held.indexOf("\r\n\r\n");
        if (headEnd < 0) break;
        const length = /content-length: *(\d+)/i.exec(held.slice(0, headEnd));
        const end = headEnd + 4 + (length === null ? 0 : Number(length[1]));
        if (held.length < end) break;
        const post = held.startsWith("POST ");
        held = held.slice(end);
        await conn.write(post ? okAnswer : notFound);
      }
    }
  } catch {
    // The worker closed the connection; nothing to answer.
  } finally {
    try {
      conn.close();
    } catch {
      // already closed
    }
  }
}

const backendListener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
(async () => {
  for await (const conn of backendListener) serveBackend(conn);
})();

// ---- the fake server: the worker's WebSocket, the wire protocol's frames ----
const requestBody = JSON.stringify({
  model: "m1",
  messages: [{ role: "user", content: "hi" }],
  max_tokens: 16,
});
/** Requests sent on the current connection and not yet answered. */
let inFlight = 0;
let answered = 0;
let nextId = 0;
/** Registers seen: more than one means the worker reconnected mid-run. */
let registers = 0;
let allAnswered: () => void = () => {};
const finished = new Promise<void>((resolve) => allAnswered = resolve);

function requestFrame(n: number): string {
  return JSON.stringify({
    type: "request",
    request_id: `probe-${n}`,
    model: "m1",
    endpoint_path: "/v1/chat/completions",
    is_streaming: false,
    body: requestBody,
    headers: {
      "content-type": "application/json",
      "accept": "application/json",
      "user-agent": "probe/1",
    },
  });
}

function sendNext(ws: WebSocket): void {
  if (answered + inFlight >= count) return;
  inFlight++;
  ws.send(requestFrame(nextId++));
}

const server = Deno.serve({
  hostname: "127.0.0.1",
  port: 0,
  onListen() {},
}, (req) => {
  const { socket: ws, response } = Deno.upgradeWebSocket(req);
  ws.onmessage = (m) => {
    if (typeof m.data !== "string") {
      throw new Error("a binary frame for a plain answer");
    }
    const frame = JSON.parse(m.data);
    switch (frame.type) {
      case "register": {
        // A worker that gave up on a slow first ack (valgrind makes
        // everything slow) registers again: what was sent before is lost.
        registers++;
        inFlight = 0;
        const listed: string[] = frame.extensions ?? [];
        ws.send(JSON.stringify({
          type: "register_ack",
          worker_id: "w-1",
          models: frame.models,
          warnings: [],
          protocol_version: frame.protocol_version,
          ...(frame.extensions === undefined ? {} : {
            extensions: listed.filter((x) => !TIMED_EXTENSIONS.has(x)),
          }),
        }));
        for (let i = 0; i < CONCURRENCY; i++) sendNext(ws);
        return;
      }
      case "response_complete":
        if (frame.status_code !== 200) {
          throw new Error(`an answer of ${frame.status_code}: ${frame.body}`);
        }
        answered++;
        inFlight--;
        if (answered === count) allAnswered();
        else sendNext(ws);
        return;
      default:
        return; // models_update, load reports and the like
    }
  };
  return response;
});

const proxyUrl = `http://127.0.0.1:${server.addr.port}`;
const backendUrl = `http://127.0.0.1:${backendListener.addr.port}`;
const config = helpers.testConfig(proxyUrl, backendUrl, {
  models: ["m1"],
  maxConcurrent: 8,
  logLevel: "info",
});
connection.startWorker(config, ["m1"], {
  log: logging.makeLogger("info", "text", "worker"),
  random: () => 0,
});
await finished;
// A run with a reconnect did that work too: its count is not comparable.
console.log(`${count} requests answered, registers=${registers}`);
// No orderly close: it would wait on timers, and add their instructions.
Deno.exit(0);
