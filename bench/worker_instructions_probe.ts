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
// until `count` are answered. Run under valgrind with a warm-up count W as
// third argument: W requests, then the process's instruction counts read from
// valgrind (`callgrind_control -e`, with nothing in flight), then `count`
// requests and a second reading; it prints their difference over `count`, the
// instructions of one request in steady state (worker, fake server and fake
// backend together; the last two are this file's, the same for every
// checkout):
//
//   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//     --smc-check=all-non-file deno run -A --config deno.json \
//     --v8-flags=--single-threaded,--predictable-gc-schedule \
//     bench/worker_instructions_probe.ts <checkout> 2000 500
//
// The V8 flags make the count repeatable: V8's background compiler and GC
// threads and its time-driven heap growing and memory reducer otherwise moved
// the same tree's figure by 7% (main thread) and 25% (all threads) between
// runs; with them all work is on the main thread, scheduled by the work
// alone, and two runs agreed to 0.04%. (Two runs with few and many requests,
// as bench/instructions_probe.ts does, also carried each run's start-up in
// the difference; one process read twice leaves it out.)
//
// The server acks only the extensions that shape a request's path, not
// capabilities-v1 or residency-v1: those run on the wall clock (a probe every
// 5 s, residency reads after answers, folded by time), which valgrind
// stretches, so they would add work with the run's duration rather than its
// requests.
import { chatCompletionBody } from "./_fixtures.ts";

const [root = ".", countArg = "500", warmArg] = Deno.args;
const count = Number(countArg);
/**
 * With a third argument W (run under valgrind): W requests first, then the
 * count read from valgrind (`callgrind_control -e`, nothing in flight), then
 * `count` requests and a second reading; their difference over `count` is
 * printed. One process, steady state only: no start-up in the figure.
 */
const warm = warmArg === undefined ? null : Number(warmArg);
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

/** How many requests may be sent so far (the warm-up's, then all). */
let limit = warm ?? count;
/** valgrind's instruction counts at the end of the warm-up. */
let atWarm: Counts | null = null;

type Counts = { main: number; all: number };

/** This process's instructions so far, per valgrind (main thread, all threads). */
async function counts(): Promise<Counts> {
  const out = await new Deno.Command("callgrind_control", {
    args: ["-e", String(Deno.pid)],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  const threads = [...text.matchAll(/^\s*Th (\d+)\s+([\d,]+)/gm)].map((
    m,
  ) => ({ thread: Number(m[1]), ir: Number(m[2]!.replaceAll(",", "")) }));
  if (threads.length === 0) throw new Error(`no counts in: ${text}`);
  return {
    main: threads.find((t) => t.thread === 1)?.ir ?? NaN,
    all: threads.reduce((sum, t) => sum + t.ir, 0),
  };
}

/** Every request allowed so far is answered: take a reading, or finish. */
async function limitReached(ws: WebSocket): Promise<void> {
  if (warm !== null && atWarm === null) {
    atWarm = await counts();
    limit = warm + count;
    for (let i = 0; i < CONCURRENCY; i++) sendNext(ws);
    return;
  }
  if (atWarm !== null) {
    const end = await counts();
    console.log(
      `instructions per request over ${count}: main=${
        ((end.main - atWarm.main) / count).toFixed(0)
      } all=${((end.all - atWarm.all) / count).toFixed(0)}`,
    );
  }
  allAnswered();
}

function sendNext(ws: WebSocket): void {
  if (answered + inFlight >= limit) return;
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
        if (answered === limit) limitReached(ws);
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
console.log(`${answered} requests answered, registers=${registers}`);
// No orderly close: it would wait on timers, and add their instructions.
Deno.exit(0);
