// Where one request's time goes at concurrency 1 (issue 31: added latency).
// Starts the mock backend, a server and one worker, sends sequential requests
// over one keep-alive connection from this process, and prints the p50 of a
// whole answer and of its first body byte, and the server's and worker's CPU
// per request (/proc/<pid>/stat over the measured requests).
//
//   deno run -A bench/hop_trace.ts [--requests 2000] [--stream] [--direct]
//     [--stamp [--whole] [--after]] [--strace]
//
// --stamp preloads bench/hop_stamp.ts into the server and the worker: every
//   socket read and write of theirs is stamped on the host's wall clock, and
//   each request's steps (client write, server read, server write, worker
//   read, ...) are printed with the median gap before each, for the most
//   common sequences. --whole follows each request to its end rather than to
//   its first body byte; --after adds the microtask after each write (how
//   long the writing turn went on).
// --strace attaches `strace -f -ttt` to the three processes instead
//   (/tmp/hop_trace.<name>); strace slows every syscall, so only its order
//   and its gaps within one process mean much.
// --direct sends to the mock itself: the figure the relay's is added to.
import { parseArgs } from "node:util";
import {
  startMockProcess,
  startServerProcess,
  startWorkerProcess,
} from "../shell/demo/cluster.ts";
import type { Child } from "../shell/procs.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    requests: { type: "string", default: "2000" },
    stream: { type: "boolean", default: false },
    strace: { type: "boolean", default: false },
    direct: { type: "boolean", default: false },
    stamp: { type: "boolean", default: false },
    whole: { type: "boolean", default: false },
    after: { type: "boolean", default: false },
  },
});
const requests = Number(values.requests);
const SECRET = "hop-trace-secret";
const started: Child[] = [];
const encoder = new TextEncoder();
const decoder = new TextDecoder();

try {
  const mock = await startMockProcess({ delayMs: 0, linesKept: 20 });
  started.push(mock.child);
  // With --stamp both relay processes preload the stamper (hop_stamp.ts).
  const stampOpts = (name: string) =>
    values.stamp
      ? {
        denoFlags: ["--preload", "bench/hop_stamp.ts"],
        permissions: ["--allow-all"],
        env: { HOP_STAMP_FILE: `/tmp/hop_stamp.${name}.json` },
      }
      : {};
  const server = await startServerProcess({
    secret: SECRET,
    ...stampOpts("server"),
  });
  started.push(server.child);
  const worker = await startWorkerProcess({
    name: "w1",
    backendUrl: mock.url,
    maxConcurrent: 4,
    serverUrl: server.url,
    secret: SECRET,
    ...stampOpts("worker"),
  });
  started.push(worker);
  const target = new URL(values.direct ? mock.url : server.url);
  const pids = {
    mock: mock.child.pid,
    server: server.child.pid,
    worker: worker.pid,
  };
  console.log(`pids ${JSON.stringify(pids)} target ${target.host}`);

  const conn = await Deno.connect({
    hostname: target.hostname,
    port: Number(target.port),
  });
  conn.setNoDelay(true);
  const body = JSON.stringify({
    model: "mock-model",
    messages: [{ role: "user", content: "hi" }],
    max_tokens: values.stream ? 16 : 5,
    stream: values.stream,
  });
  const request = encoder.encode(
    `POST /v1/chat/completions HTTP/1.1\r\nHost: ${target.host}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
  );
  const client: Client = {
    conn,
    request,
    buf: new Uint8Array(64 * 1024),
    sent: [],
    firstAt: [],
    endAt: [],
  };
  const { sent, firstAt, endAt } = client;
  const once = () => oneRequest(client);

  for (let i = 0; i < 200; i++) await once(); // warm-up
  sent.length = firstAt.length = endAt.length = 0;
  let tracers: Deno.ChildProcess[] = [];
  if (values.strace) {
    tracers = Object.entries(pids).map(([name, pid]) =>
      new Deno.Command("strace", {
        args: [
          "-f",
          "-ttt",
          "-e",
          "trace=read,write,writev,recvfrom,sendto,epoll_wait,epoll_pwait,epoll_pwait2,futex",
          "-o",
          `/tmp/hop_trace.${name}`,
          "-p",
          String(pid),
        ],
        stderr: "null",
      }).spawn()
    );
    await new Promise((r) => setTimeout(r, 1500));
  }
  const cpu0 = cpuTicks([pids.server, pids.worker]);
  const firsts: number[] = [];
  const totals: number[] = [];
  for (let i = 0; i < requests; i++) {
    const r = await once();
    firsts.push(r.first);
    totals.push(r.total);
  }
  const cpu1 = cpuTicks([pids.server, pids.worker]);
  for (const t of tracers) t.kill("SIGINT");
  for (const t of tracers) await t.status;
  conn.close();
  if (values.stamp) {
    for (const pid of [pids.server, pids.worker]) Deno.kill(pid, "SIGUSR2");
    await new Promise((r) => setTimeout(r, 1000));
    const events = [
      ...readStamps("S", "/tmp/hop_stamp.server.json"),
      ...readStamps("W", "/tmp/hop_stamp.worker.json"),
    ].sort((a, b) => a.t - b.t);
    printHops(events, sent, firstAt, endAt);
  }
  const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  console.log(
    `requests ${requests} total p50 ${
      p50(totals)!.toFixed(0)
    } µs first byte p50 ${
      p50(firsts)!.toFixed(0)
    } µs; CPU µs a request: server ${perRequest(cpu1[0]! - cpu0[0]!)} worker ${
      perRequest(cpu1[1]! - cpu0[1]!)
    }`,
  );
} finally {
  for (const c of started.reverse()) await c.stop(2000);
}

/** The load generator's one keep-alive connection and what it stamped. */
type Client = {
  conn: Deno.TcpConn;
  request: Uint8Array;
  buf: Uint8Array;
  /** Wall-clock ms of each request's write, first body byte and end. */
  sent: number[];
  firstAt: number[];
  endAt: number[];
};

/** One request; resolves with its first body byte and its end (µs after its write). */
async function oneRequest(
  c: Client,
): Promise<{ first: number; total: number }> {
  const t0 = performance.now();
  c.sent.push(performance.timeOrigin + t0);
  await c.conn.write(c.request);
  let text = "";
  let first = -1;
  for (;;) {
    const n = await c.conn.read(c.buf);
    if (n === null) throw new Error("closed");
    text += decoder.decode(c.buf.subarray(0, n));
    const headEnd = text.indexOf("\r\n\r\n");
    if (headEnd < 0) continue;
    if (first < 0 && text.length > headEnd + 4) first = performance.now() - t0;
    if (done(text, headEnd)) break;
  }
  const t1 = performance.now();
  c.firstAt.push(performance.timeOrigin + t0 + first);
  c.endAt.push(performance.timeOrigin + t1);
  return { first: first * 1000, total: (t1 - t0) * 1000 };
}

/** utime + stime of each process, in clock ticks (/proc/<pid>/stat). */
function cpuTicks(pids: number[]): number[] {
  return pids.map((pid) => {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(fields[11]) + Number(fields[12]);
  });
}

/** Clock ticks (USER_HZ 100) over the measured requests as µs a request. */
function perRequest(ticks: number): string {
  return (ticks * 10_000 / requests).toFixed(0);
}

/** The answer is complete: Content-Length reached, or a chunked body's end. */
function done(text: string, headEnd: number): boolean {
  const head = text.slice(0, headEnd).toLowerCase();
  const m = /content-length: *(\d+)/.exec(head);
  if (m !== null) return text.length - headEnd - 4 >= Number(m[1]);
  return text.endsWith("0\r\n\r\n");
}

type Stamp = {
  t: number;
  proc: string;
  kind: string;
  sock: number;
  bytes: number;
};

function readStamps(proc: string, file: string): Stamp[] {
  const raw = JSON.parse(Deno.readTextFileSync(file)) as number[];
  const out: Stamp[] = [];
  for (let i = 0; i < raw.length; i += 4) {
    out.push({
      t: raw[i]!,
      kind: ["r", "w", "a"][raw[i + 1]!]!,
      proc,
      sock: raw[i + 2]!,
      bytes: raw[i + 3]!,
    });
  }
  return out;
}

/**
 * Each request's events between its send and its first body byte, as steps
 * "C>" (the client's write), then "S r12 412" (process, read/write, socket,
 * bytes)..., then "<C" (the client's first byte): the median gap before each
 * step over the requests whose steps match the most common sequence.
 */
function printHops(
  events: Stamp[],
  sent: number[],
  firstAt: number[],
  endAt: number[],
): void {
  const until = values.whole ? endAt : firstAt;
  const bySeq = new Map<string, number[][]>();
  let at = 0;
  for (let i = 0; i < sent.length; i++) {
    while (at < events.length && events[at]!.t < sent[i]!) at++;
    const steps = ["C>"];
    const times = [sent[i]!];
    for (let j = at; j < events.length && events[j]!.t <= until[i]!; j++) {
      const e = events[j]!;
      if (e.kind === "a" && !values.after) continue;
      steps.push(`${e.proc} ${e.kind}${e.sock}`);
      times.push(e.t);
    }
    steps.push("<C");
    times.push(until[i]!);
    const key = steps.join(" | ");
    const gaps = times.slice(1).map((t, k) => (t - times[k]!) * 1000);
    const list = bySeq.get(key) ?? [];
    list.push(gaps);
    bySeq.set(key, list);
    void endAt;
  }
  const ranked = [...bySeq.entries()].sort((a, b) => b[1].length - a[1].length);
  for (const [key, list] of ranked.slice(0, 3)) {
    console.log(`\n${list.length} requests:`);
    const steps = key.split(" | ");
    let sum = 0;
    for (let k = 1; k < steps.length; k++) {
      const gaps = list.map((g) => g[k - 1]!).sort((a, b) => a - b);
      const med = gaps[gaps.length >> 1]!;
      sum += med;
      console.log(
        `  ${steps[k - 1]!.padEnd(8)} -> ${steps[k]!.padEnd(8)} ${
          med.toFixed(1).padStart(7)
        } µs`,
      );
    }
    console.log(`  sum of medians ${sum.toFixed(0)} µs`);
  }
}
