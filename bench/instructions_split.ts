// Issue 31: the SERVER's own instructions per plain request, apart from its
// clients and worker (bench/instructions_probe.ts counts all three in one
// process). A checkout's server runs alone under valgrind (callgrind); this
// process is its fake worker (a native WebSocket answering each request with
// a llama-server-like response_complete) and four raw keep-alive clients. After
// `warm` requests the counters are zeroed (`callgrind_control -z`), `count`
// more are sent, and the counters dumped (`callgrind_control -d`): startup,
// module loading and the first compiles are left out, so the count is the
// requests' own and one run per checkout is enough. The server's V8 runs with
// `--predictable` under valgrind (see `drive`).
//
//   deno run -A --config deno.json bench/instructions_split.ts \
//     <checkout> [count=2000] [server|relay] [warm=500] [clients=4] \
//     [prompt=2] [--profile=<dir>]
//
// `prompt`: the characters of the one user message (2: "hi", a request of
// ~200 bytes; a few thousand make one larger than the door's first read).
//
// One client (`clients` 1) makes the count the most repeatable: no two
// requests share a read or a write, so no run depends on how they batched.
//
// `--profile=<dir>`: no valgrind; the server runs with `--cpu-prof` (100 µs
// interval) and writes its profile to <dir> when the requests are done
// (bench/profile_top.ts summarises it): the server's own functions, without
// its clients' and worker's.
//
// `server`: the bare server (startServer, no hooks, LOG_LEVEL error); `relay`:
// as `deno task server` runs it (startRelay with the settings' defaults: the
// metrics tap, the traceparent, LOG_LEVEL info). Prints the instructions per
// request of all the server's threads and of its main thread (our JS).
import { chatCompletionBody } from "./_fixtures.ts";
import { plainClient, plainRequest } from "./_plain_client.ts";

const SECRET = "probe-worker-secret-0123456789";

type Served = { port: number };

/** The server side (run under valgrind): starts, prints its port, serves until killed. */
async function serve(root: string, mode: string): Promise<void> {
  const base = new URL(`${root.replace(/\/$/, "")}/`, `file://${Deno.cwd()}/`);
  const load = (path: string) => import(new URL(path, base).href);
  const config = await load("shell/server/config.ts");
  const log = await load("shell/log.ts");
  const env: Record<string, string> = {
    WORKER_SECRET: SECRET,
    LISTEN_ADDR: "127.0.0.1:0",
    LOG_LEVEL: mode === "relay" ? "info" : "error",
  };
  const loaded = config.loadServerConfig([], (name: string) => env[name]);
  const settings = { ...loaded.config, tickMs: 1_000_000 };
  const logger = log.makeLogger(settings.logLevel, "text", "server");
  const running: Served = mode === "relay"
    ? await (await load("shell/server/relay.ts")).startRelay(settings, logger)
    : await (await load("shell/server/server.ts")).startServer(
      settings,
      logger,
    );
  // A profiled run (--profile) writes its profile on exit.
  Deno.addSignalListener("SIGTERM", () => Deno.exit(0));
  console.log(`port ${running.port}`);
}

async function drive(): Promise<void> {
  const profile = Deno.args.find((a) => a.startsWith("--profile="))
    ?.slice("--profile=".length);
  const [
    root = ".",
    countArg = "2000",
    mode = "server",
    warmArg = "500",
    clientsArg = "4",
    promptArg = "2",
  ] = Deno.args.filter((a) => !a.startsWith("--profile="));
  const count = Number(countArg);
  const warm = Number(warmArg);
  const clients = Number(clientsArg);
  const body = requestBody(Number(promptArg));
  const out = await Deno.makeTempDir({ prefix: "instructions_split" });
  const serveArgs = [
    "run",
    "-A",
    "--config",
    "deno.json",
    new URL(import.meta.url).pathname,
    "--serve",
    root,
    mode,
  ];
  const child = new Deno.Command(
    profile === undefined ? "valgrind" : Deno.execPath(),
    {
      args: profile === undefined
        ? [
          "--tool=callgrind",
          `--callgrind-out-file=${out}/cg.%p`,
          "--separate-threads=yes",
          "--smc-check=all-non-file",
          Deno.execPath(),
          serveArgs[0]!,
          // V8 single-threaded and deterministic (no concurrent marking,
          // sweeping or compiling): the collector's and the compiler's work
          // lands at the same points in every run, on the main thread, so
          // the same checkout counts the same to within a fraction of a
          // percent.
          "--v8-flags=--predictable",
          ...serveArgs.slice(1),
        ]
        : [
          serveArgs[0]!,
          "--cpu-prof",
          `--cpu-prof-dir=${profile}`,
          "--cpu-prof-interval",
          "100",
          ...serveArgs.slice(1),
        ],
      stdout: "piped",
      stderr: "null",
    },
  ).spawn();
  const port = await portOf(child.stdout);
  const pid = child.pid;
  try {
    await answerAsWorker(port);
    await requests(port, warm, clients, body);
    if (profile !== undefined) {
      await requests(port, count, clients, body);
      child.kill("SIGTERM");
      await child.status;
      console.log(`${mode} ${root}: profile in ${profile}`);
      return;
    }
    await control(pid, "-z");
    await requests(port, count, clients, body);
    await control(pid, "-d");
    const { all, main } = await counts(out);
    console.log(
      `${mode} ${root}: ${count} requests, instructions per request: ` +
        `all threads ${(all / count / 1000).toFixed(1)} k, main thread ${
          (main / count / 1000).toFixed(1)
        } k`,
    );
  } finally {
    try {
      child.kill("SIGKILL");
    } catch {
      // already gone (a profiled run)
    }
    await child.status;
    await Deno.remove(out, { recursive: true });
  }
  Deno.exit(0);
}

/** The port the server prints; the rest of its output is read and dropped. */
function portOf(stdout: ReadableStream<Uint8Array>): Promise<number> {
  return new Promise((resolve, reject) => {
    let text = "";
    let found = false;
    void (async () => {
      for await (const chunk of stdout.pipeThrough(new TextDecoderStream())) {
        if (found) continue;
        text += chunk;
        const m = /^port (\d+)$/m.exec(text);
        if (m !== null) {
          found = true;
          resolve(Number(m[1]));
        }
      }
      reject(new Error(`the server did not start: ${text}`));
    })();
  });
}

/** Runs `callgrind_control <flag> <pid>` (zero or dump) and waits for it. */
async function control(pid: number, flag: string): Promise<void> {
  const done = await new Deno.Command("callgrind_control", {
    args: [flag, String(pid)],
    stdout: "null",
  }).output();
  if (!done.success) throw new Error(`callgrind_control ${flag} failed`);
}

/** Sums the dumped parts' counts: every thread, and thread 1 (the main one). */
async function counts(dir: string): Promise<{ all: number; main: number }> {
  let all = 0;
  let main = 0;
  for await (const e of Deno.readDir(dir)) {
    // The dump callgrind_control asked for is part 1 (`cg.<pid>.1-<thread>`).
    const m = /^cg\.\d+\.1-(\d+)$/.exec(e.name);
    if (m === null) continue;
    const text = await Deno.readTextFile(`${dir}/${e.name}`);
    const total = /^summary: (\d+)$/m.exec(text) ??
      /^totals: (\d+)$/m.exec(text);
    const n = total === null ? 0 : Number(total[1]);
    all += n;
    if (Number(m[1]) === 1) main = n;
  }
  if (all === 0) throw new Error("no callgrind dump was found");
  return { all, main };
}

/** A registered worker answering every request frame at once. */
async function answerAsWorker(port: number): Promise<void> {
  const ws = new WebSocket(
    `ws://127.0.0.1:${port}/v1/worker/connect?provider=local`,
    { headers: { "x-worker-secret": SECRET } } as unknown as string[],
  );
  const answer = chatCompletionBody("m1");
  const registered = new Promise<void>((resolve, reject) => {
    ws.onerror = () => reject(new Error("the worker socket failed"));
    ws.onmessage = (e: MessageEvent) => {
      const frame = JSON.parse(e.data as string);
      if (frame.type === "register_ack") return resolve();
      if (frame.type !== "request") return;
      ws.send(JSON.stringify({
        type: "response_complete",
        request_id: frame.request_id,
        status_code: 200,
        headers: { "content-type": "application/json" },
        body: answer,
      }));
    };
  });
  await new Promise<void>((resolve) => ws.onopen = () => resolve());
  ws.send(JSON.stringify({
    type: "register",
    worker_name: "probe-worker",
    models: ["m1"],
    max_concurrent: 64,
    protocol_version: "2026-04-bridge-v1",
    current_load: 0,
  }));
  await registered;
}

function requestBody(promptChars: number): string {
  return JSON.stringify({
    model: "m1",
    messages: [{
      role: "user",
      content: "hi".repeat(promptChars).slice(0, promptChars),
    }],
    max_tokens: 16,
  });
}

async function requests(
  port: number,
  count: number,
  clients: number,
  body: string,
): Promise<void> {
  const request = plainRequest(body);
  const left = { n: count };
  await Promise.all(
    Array.from({ length: clients }, () => plainClient(port, request, left)),
  );
}

if (Deno.args[0] === "--serve") await serve(Deno.args[1]!, Deno.args[2]!);
else await drive();
