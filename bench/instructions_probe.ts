// Issue 31: the server's whole path per plain request (the door, the routes,
// the core, the worker door's WebSocket) counted in instructions rather than
// time, for cuts of a microsecond or two that CPU time on this shared machine
// cannot resolve (bench/README.md, "The server's own path, round 2").
//
// One process: a checkout's server (`startTestServer`), a fake worker on a
// native WebSocket answering each request with a llama-server-like
// response_complete, and four raw keep-alive clients sending `count` requests.
// Run it under valgrind twice per checkout, with few and with many requests;
// the difference over the difference in requests is the instructions of one
// request (server, fake worker and clients together; the last two are the same
// code for every checkout):
//
//   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//     --smc-check=all-non-file deno run -A --config deno.json \
//     bench/instructions_probe.ts <checkout> <count>
//
// `Collected :` in valgrind's summary is the count. The core's tick is made
// rare so that the wall time (long under valgrind) adds no ticks.
//
// A third argument `relay` runs the relay as `deno task server` does instead
// (`startRelay` with the settings' defaults: the metrics tap, the traceparent,
// LOG_LEVEL info), where the default is the bare server (`startServer`, no
// hooks, LOG_LEVEL error).
import { chatCompletionBody } from "./_fixtures.ts";
import { plainClient, plainRequest } from "./_plain_client.ts";

const [root = ".", countArg = "500", mode = "server"] = Deno.args;
const count = Number(countArg);
const CLIENTS = 4;

type Helpers = {
  SECRET: string;
  startTestServer(config: unknown): Promise<{ port: number }>;
  testConfig(core: unknown, rest: unknown): unknown;
  withAddresses<T extends { port: number }>(running: T): T;
  registeredWorker(
    server: { port: number },
    register: Record<string, unknown>,
  ): Promise<{ ws: WebSocket }>;
};
type RelayModules = {
  config: {
    loadServerConfig(
      args: string[],
      env: (name: string) => string | undefined,
    ): { config: Record<string, unknown> };
  };
  relay: {
    startRelay(config: unknown, log: unknown): Promise<{ port: number }>;
  };
  log: { makeLogger(level: unknown, format: string, name: string): unknown };
};

const base = new URL(`${root.replace(/\/$/, "")}/`, `file://${Deno.cwd()}/`);
const load = (path: string) => import(new URL(path, base).href);
const h: Helpers = await load("shell/server/_test_helpers.ts");

async function startRelay(): Promise<{ port: number }> {
  const m: RelayModules = {
    config: await load("shell/server/config.ts"),
    relay: await load("shell/server/relay.ts"),
    log: await load("shell/log.ts"),
  };
  const env: Record<string, string> = {
    WORKER_SECRET: h.SECRET,
    LISTEN_ADDR: "127.0.0.1:0",
  };
  const { config } = m.config.loadServerConfig([], (name) => env[name]);
  const log = m.log.makeLogger(config.logLevel, "text", "server");
  return h.withAddresses(
    await m.relay.startRelay({ ...config, tickMs: 1_000_000 }, log),
  );
}

const server = mode === "relay"
  ? await startRelay()
  : await h.startTestServer(h.testConfig({}, { tickMs: 1_000_000 }));
const worker = await h.registeredWorker(server, {
  models: ["m1"],
  max_concurrent: 64,
});
const answer = chatCompletionBody("m1");
worker.ws.onmessage = (e: MessageEvent) => {
  const frame = JSON.parse(e.data as string);
  if (frame.type !== "request") return;
  worker.ws.send(JSON.stringify({
    type: "response_complete",
    request_id: frame.request_id,
    status_code: 200,
    headers: { "content-type": "application/json" },
    body: answer,
  }));
};

const body = JSON.stringify({
  model: "m1",
  messages: [{ role: "user", content: "hi" }],
  max_tokens: 16,
});
const request = plainRequest(body);
const left = { n: count };
await Promise.all(
  Array.from(
    { length: CLIENTS },
    () => plainClient(server.port, request, left),
  ),
);
console.log(`${count} requests answered`);
// No orderly close: it would wait on timers, and add their instructions.
Deno.exit(0);
