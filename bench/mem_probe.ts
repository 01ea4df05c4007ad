// Memory accounting probe (issue 18): what one idle worker and one open stream
// cost the server, split into V8 heap (used, committed by space) and the rest of
// the RSS (native: Deno/Rust resources, allocator, paged-in code), for the relay
// and for the bare libraries it runs on, so what is ours can be told apart.
//
//   deno run -A bench/mem_probe.ts <server> <load> <n> [--snapshot DIR] [--maps]
//
// <server>: relay (startRelay, what `deno task server` runs) | ws (a bare `ws`
// WebSocketServer behind node:http, answering any frame with register_ack) |
// http (a bare node:http server holding each response open after one SSE
// chunk) | net (a bare node:net server holding each socket).
// <load>: workers (n idle WebSocket workers that register and answer pings) |
// streams (n open streaming requests; against the relay, ceil(n/1000) scripted
// workers with max_concurrent 1000 answer each request with one chunk and hold
// it) | tcp (n raw TCP connections, for `net`) | bigbody (issue 24: n
// concurrent non-streaming answers of --body-mib MiB each (default 200) from a
// raw node:http backend, through a real worker process (`shell/worker/main.ts`);
// relay only; reports the server's peak RSS (VmHWM) and its RSS afterwards,
// not per-unit figures). `--server-env K=V` (repeatable) sets relay settings,
// e.g. --server-env MAX_RESPONSE_BODY_BYTES=268435456.
//
// The server and the load run as two child processes (the load's memory is not
// the server's). The server is measured at 0 and at n, each time before and
// after a forced full GC; the figures are the differences divided by n. With
// --snapshot DIR it also writes DIR/n0.heapsnapshot and DIR/n1.heapsnapshot
// (compare them in Chrome DevTools, Memory tab, Comparison view); with --maps,
// the memory mappings whose RSS grew. Pass V8 flags to both children through
// DENO_V8_FLAGS (e.g. --max-semi-space-size=1 to keep the young generation from
// growing to its cap, which the bench would otherwise count per connection).
import http from "node:http";
import net from "node:net";
import v8 from "node:v8";
import { parseArgs } from "node:util";

const SECRET = "mem-probe-secret-0123456789abcdef";

type Stats = {
  rssKiB: number;
  rssNoGcKiB: number;
  heapUsedKiB: number;
  heapUsedNoGcKiB: number;
  heapCommittedKiB: number;
  committedBySpace: Record<string, number>;
};
type Mapping = { range: string; name: string; rssKiB: number };

// ---- the server child ------------------------------------------------------

async function serve(
  kind: string,
  extraEnv: Record<string, string>,
): Promise<number> {
  if (kind === "relay") {
    const { loadServerConfig } = await import("../shell/server/config.ts");
    const { startRelay } = await import("../shell/server/relay.ts");
    const { makeLogger } = await import("../shell/log.ts");
    const env: Record<string, string> = {
      WORKER_SECRET: SECRET,
      LISTEN_ADDR: "127.0.0.1:0",
      MAX_QUEUE_LEN: "20000",
      LOG_LEVEL: "error",
      ...extraEnv,
    };
    const loaded = loadServerConfig([], (n) => env[n], env);
    if (loaded.help) throw new Error("unexpected help");
    const relay = await startRelay(
      loaded.config,
      makeLogger("error", "text", "server"),
    );
    return relay.port;
  }
  let server: http.Server | net.Server;
  if (kind === "ws") {
    const { WebSocketServer } = await import("ws");
    const wss = new WebSocketServer({
      noServer: true,
      maxPayload: 64 * 1024 * 1024,
    });
    server = http.createServer((_req, res) => res.end());
    server.on("upgrade", (req, socket, head) => {
      wss.handleUpgrade(req, socket, head, (ws) => {
        ws.on("message", () => ws.send('{"type":"register_ack"}'));
      });
    });
  } else if (kind === "http") {
    server = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write('data: {"choices":[{"delta":{"content":"x"}}]}\n\n');
      });
    });
  } else if (kind === "net") {
    server = net.createServer((socket) => socket.on("data", () => {}));
  } else throw new Error(`unknown server ${kind}`);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return (server.address() as net.AddressInfo).port;
}

function vmRssKiB(field = "VmRSS"): number {
  const status = Deno.readTextFileSync("/proc/self/status");
  const m = new RegExp(`${field}:\\s+(\\d+)`).exec(status);
  return Number(m?.[1] ?? 0);
}

function mappings(): Mapping[] {
  const out: Mapping[] = [];
  let cur: Mapping | null = null;
  for (const line of Deno.readTextFileSync("/proc/self/smaps").split("\n")) {
    const head = /^([0-9a-f]+-[0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head !== null) {
      cur = { range: head[1]!, name: head[2] || "[anon]", rssKiB: 0 };
      out.push(cur);
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss !== null && cur !== null) cur.rssKiB = Number(rss[1]);
  }
  return out;
}

async function stats(): Promise<Stats> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error("run the server with --expose-gc");
  const rssNoGcKiB = vmRssKiB();
  const heapUsedNoGcKiB = v8.getHeapStatistics().used_heap_size / 1024;
  gc();
  await new Promise((r) => setTimeout(r, 200));
  gc();
  const h = v8.getHeapStatistics();
  return {
    rssKiB: vmRssKiB(),
    rssNoGcKiB,
    heapUsedKiB: h.used_heap_size / 1024,
    heapUsedNoGcKiB,
    heapCommittedKiB: h.total_physical_size / 1024,
    committedBySpace: Object.fromEntries(
      v8.getHeapSpaceStatistics().map((
        s,
      ) => [s.space_name, s.physical_space_size / 1024]),
    ),
  };
}

async function* lines(stream: ReadableStream<Uint8Array>) {
  let buf = "";
  for await (const text of stream.pipeThrough(new TextDecoderStream())) {
    buf += text;
    for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
      yield buf.slice(0, i);
      buf = buf.slice(i + 1);
    }
  }
}

/** Prints "port N", then answers one JSON line per stdin command. */
async function serverChild(
  kind: string,
  extraEnv: Record<string, string>,
): Promise<void> {
  console.log(`port ${await serve(kind, extraEnv)}`);
  for await (const line of lines(Deno.stdin.readable)) {
    const [cmd, arg] = line.split(" ");
    if (cmd === "stats") console.log(JSON.stringify(await stats()));
    else if (cmd === "rss") {
      // No forced GC: what the process holds, and the most it ever held.
      const rssKiB = vmRssKiB();
      console.log(JSON.stringify({ rssKiB, peakKiB: vmRssKiB("VmHWM") }));
    } else if (cmd === "maps") console.log(JSON.stringify(mappings()));
    else if (cmd === "snap") {
      v8.writeHeapSnapshot(arg!);
      console.log("{}");
    }
  }
}

// ---- the load child ----------------------------------------------------------

function connectWorker(
  url: string,
  name: string,
  maxConcurrent: number,
  onRequest: (ws: WebSocket, frame: { request_id: string }) => void,
): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { "X-Worker-Secret": SECRET } });
    ws.onopen = () =>
      ws.send(JSON.stringify({
        type: "register",
        worker_name: name,
        models: ["probe-model"],
        max_concurrent: maxConcurrent,
        protocol_version: "1",
        current_load: 0,
      }));
    ws.onmessage = (m) => {
      const f = JSON.parse(String(m.data));
      if (f.type === "register_ack") resolve(ws);
      else if (f.type === "ping") {
        ws.send(JSON.stringify({ type: "pong", current_load: 0 }));
      } else if (f.type === "request") onRequest(ws, f);
    };
    ws.onclose = (c) => reject(new Error(`worker closed: ${c.code}`));
  });
}

async function lanes(n: number, width: number, one: () => Promise<unknown>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next++ < n) await one();
    }),
  );
}

/** Opens the load, prints "ready", and holds it until killed. */
async function loadChild(
  kind: string,
  n: number,
  base: string,
  relay: boolean,
): Promise<void> {
  const wsUrl = base.replace(/^http/, "ws") +
    "/v1/worker/connect?provider=local";
  const held: unknown[] = [];
  let i = 0;
  if (kind === "workers") {
    await lanes(n, 50, async () => {
      held.push(await connectWorker(wsUrl, `idle-${i++}`, 1, () => {}));
    });
  } else if (kind === "tcp") {
    const u = new URL(base);
    await lanes(n, 50, async () => {
      const c = await Deno.connect({ hostname: u.hostname, port: +u.port });
      await c.write(new TextEncoder().encode("hello"));
      held.push(c);
    });
  } else if (kind === "streams") {
    const chunk = 'data: {"choices":[{"delta":{"content":"x"}}]}\n\n';
    for (let w = 0; relay && w < Math.ceil(n / 1000); w++) {
      held.push(
        await connectWorker(
          wsUrl,
          `slow-${w}`,
          1000,
          (ws, f) =>
            ws.send(JSON.stringify({
              type: "response_chunk",
              request_id: f.request_id,
              chunk,
            })),
        ),
      );
    }
    const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
    const u = new URL(base);
    const body = JSON.stringify({
      model: "probe-model",
      stream: true,
      max_tokens: 1000,
      messages: [{ role: "user", content: "bench" }],
    });
    await lanes(n, 100, () =>
      new Promise<void>((resolve, reject) => {
        const req = http.request({
          host: u.hostname,
          port: Number(u.port),
          path: "/v1/chat/completions",
          method: "POST",
          agent,
          headers: {
            "content-type": "application/json",
            "content-length": String(body.length),
          },
        }, (res) => {
          if (res.statusCode !== 200) {
            reject(new Error(`stream answered ${res.statusCode}`));
          }
          res.on("data", () => {});
          held.push(res);
          resolve();
        });
        req.on("error", reject);
        req.end(body);
      }));
  } else throw new Error(`unknown load ${kind}`);
  console.log("ready");
  // Raw connections keep no op pending: a timer keeps the process (and them) up.
  setInterval(() => held.length, 60_000);
  await new Promise(() => {});
}

/**
 * Issue 24: `n` concurrent non-streaming answers of `bodyMiB` MiB from a raw
 * backend through a real worker process; prints "done <json>" with each
 * answer's status and size (bodies are counted, never kept).
 */
async function bigBodyChild(
  n: number,
  base: string,
  bodyMiB: number,
): Promise<void> {
  const { bigChat, startBigBodyBackend } = await import(
    "../e2e/_big_body_backend.ts"
  );
  const { startWorkerProcess } = await import("../shell/demo/cluster.ts");
  const backend = await startBigBodyBackend(
    bodyMiB * 1024 * 1024,
    "probe-model",
  );
  const worker = await startWorkerProcess({
    name: "big-body",
    serverUrl: base,
    secret: SECRET,
    backendUrl: backend.url,
    maxConcurrent: Math.max(4, n),
  });
  const one = async () => {
    const a = await bigChat(base, "probe-model", 400);
    return {
      status: a.status,
      bytes: a.bytes,
      ...(a.status === 200 ? {} : { error: a.head }),
    };
  };
  const results = await Promise.all(Array.from({ length: n }, one));
  await worker.stop(5_000);
  await backend.close();
  console.log(`done ${JSON.stringify(results)}`);
  await new Promise(() => {});
}

async function driveBigBody(
  n: number,
  bodyMiB: number,
  serverEnv: string[],
): Promise<void> {
  const { srv, ask, port } = await startServerChild([
    "relay",
    ...serverEnv,
  ]);
  const s0 = await ask("rss");
  const started = performance.now();
  const ld = child([
    "--load-child",
    "bigbody",
    String(n),
    `http://127.0.0.1:${port}`,
    "relay",
    "--body-mib",
    String(bodyMiB),
  ], "");
  let results: unknown = null;
  for await (const line of lines(ld.stdout)) {
    if (line.startsWith("done ")) {
      results = JSON.parse(line.slice(5));
      break;
    }
  }
  if (results === null) throw new Error("the load child ended without results");
  const seconds = Math.round((performance.now() - started) / 100) / 10;
  const s1 = await ask("rss");
  await new Promise((r) => setTimeout(r, 3000));
  const s2 = await ask("rss");
  killAll([ld, srv]);
  const mib = (kib: number) => Math.round(kib / 1024);
  console.log(JSON.stringify({
    server: "relay",
    load: "bigbody",
    n,
    bodyMiB,
    serverEnv,
    seconds,
    baselineRssMiB: mib(s0.rssKiB),
    peakRssMiB: mib(s1.peakKiB),
    peakOverBody: Math.round(mib(s1.peakKiB) / bodyMiB * 100) / 100,
    rssAfterMiB: mib(s1.rssKiB),
    rssAfter3sMiB: mib(s2.rssKiB),
    results,
  }));
}

// ---- the driver ----------------------------------------------------------------

function child(args: string[], v8Flags: string): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      ...(v8Flags === "" ? [] : [`--v8-flags=${v8Flags}`]),
      import.meta.filename!,
      ...args,
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
}

/** Starts a server child (`--server-child ...args`), waits for its port and
 * lets it settle; `ask` sends one command on its stdin and parses the JSON
 * line it answers. */
async function startServerChild(args: string[]) {
  const srv = child(["--server-child", ...args], "--expose-gc");
  const out = lines(srv.stdout);
  const writer = srv.stdin.getWriter();
  const ask = async (cmd: string) => {
    await writer.write(new TextEncoder().encode(cmd + "\n"));
    const r = await out.next();
    if (r.done) throw new Error("the server child ended");
    return JSON.parse(r.value);
  };
  const first = await out.next();
  const port = String(first.value).replace(/^port /, "");
  await new Promise((r) => setTimeout(r, 1500));
  return { srv, ask, port };
}

function killAll(children: Deno.ChildProcess[]): void {
  for (const p of children) {
    try {
      p.kill("SIGKILL");
    } catch {
      // Already gone.
    }
  }
}

async function drive(
  server: string,
  load: string,
  n: number,
  snapshot: string | undefined,
  maps: boolean,
): Promise<void> {
  const { srv, ask, port } = await startServerChild([server]);
  const s0: Stats = await ask("stats");
  const m0: Mapping[] = maps ? await ask("maps") : [];
  if (snapshot !== undefined) await ask(`snap ${snapshot}/n0.heapsnapshot`);

  const ld = child([
    "--load-child",
    load,
    String(n),
    `http://127.0.0.1:${port}`,
    server === "relay" ? "relay" : "bare",
  ], "");
  for await (const line of lines(ld.stdout)) if (line === "ready") break;
  await new Promise((r) => setTimeout(r, 2000));
  const s1: Stats = await ask("stats");
  const m1: Mapping[] = maps ? await ask("maps") : [];
  if (snapshot !== undefined) await ask(`snap ${snapshot}/n1.heapsnapshot`);
  killAll([ld, srv]);

  const per = (a: number, b: number) => Math.round((b - a) / n * 100) / 100;
  const bySpace: Record<string, number> = {};
  for (const [space, kib] of Object.entries(s1.committedBySpace)) {
    const d = per(s0.committedBySpace[space] ?? 0, kib);
    if (d !== 0) bySpace[space] = d;
  }
  const rss = per(s0.rssKiB, s1.rssKiB);
  const committed = per(s0.heapCommittedKiB, s1.heapCommittedKiB);
  console.log(JSON.stringify({
    server,
    load,
    n,
    v8Flags: Deno.env.get("DENO_V8_FLAGS") ?? "",
    perUnitKiB: {
      rssNoGc: per(s0.rssNoGcKiB, s1.rssNoGcKiB),
      heapUsedNoGc: per(s0.heapUsedNoGcKiB, s1.heapUsedNoGcKiB),
      rss,
      heapUsed: per(s0.heapUsedKiB, s1.heapUsedKiB),
      heapCommitted: committed,
      outsideHeap: Math.round((rss - committed) * 100) / 100,
      heapCommittedBySpace: bySpace,
    },
  }));
  if (maps) {
    const before = new Map(m0.map((m) => [m.range, m.rssKiB]));
    const grown = m1
      .map((m) => ({ ...m, grewKiB: m.rssKiB - (before.get(m.range) ?? 0) }))
      .filter((m) => m.grewKiB >= 512)
      .sort((a, b) => b.grewKiB - a.grewKiB);
    for (const m of grown) {
      console.log(`  +${m.grewKiB} KiB  ${m.range}  ${m.name}`);
    }
  }
}

const { values, positionals } = parseArgs({
  args: Deno.args,
  allowPositionals: true,
  options: {
    "server-child": { type: "boolean" },
    "load-child": { type: "boolean" },
    snapshot: { type: "string" },
    maps: { type: "boolean" },
    "body-mib": { type: "string", default: "200" },
    "server-env": { type: "string", multiple: true, default: [] },
  },
});
const [a, b, c, d, e] = positionals;
const serverEnv = values["server-env"]!;
if (values["server-child"]) {
  await serverChild(
    a!,
    Object.fromEntries(serverEnv.map((kv) => {
      const i = kv.indexOf("=");
      return [kv.slice(0, i), kv.slice(i + 1)];
    })),
  );
} else if (values["load-child"] && a === "bigbody") {
  await bigBodyChild(Number(b), c!, Number(values["body-mib"]));
} else if (values["load-child"]) {
  await loadChild(a!, Number(b), c!, d === "relay");
} else if (a === "relay" && b === "bigbody" && c !== undefined) {
  await driveBigBody(
    Number(c),
    Number(values["body-mib"]),
    serverEnv.flatMap((kv) => ["--server-env", kv]),
  );
  Deno.exit(0);
} else if (a === undefined || b === undefined || c === undefined || e) {
  console.error(
    "usage: mem_probe.ts relay|ws|http|net workers|streams|tcp|bigbody N [--snapshot DIR] [--maps] [--body-mib M] [--server-env K=V]...",
  );
  Deno.exit(2);
} else {
  await drive(a, b, Number(c), values.snapshot, values.maps === true);
  Deno.exit(0);
}
