// `deno task demo`: the relay on loopback with nothing to install — a mock
// OpenAI/Anthropic backend, the server and one worker, three real processes —
// then the curl commands to try. Ctrl-C or SIGTERM stops all three: the worker
// drains first, then the server, then the mock.
import { parseArgs } from "node:util";
import { type Child, stopInReverse, waitUntil } from "../procs.ts";
import { workersConnected } from "./relay_probes.ts";
import {
  startMockProcess,
  startServerProcess,
  startWorkerProcess,
} from "./cluster.ts";

const HELP = `modelrelay demo: mock backend + server + one worker on loopback

Usage: deno task demo [options]

  --port <n>       server port (default 8080; 0 = any free port)
  --delay-ms <n>   mock backend pace, ms per streamed word (default 40)
  --quiet          do not echo the three processes' logs
  --help           show this help
`;

const MODEL = "mock-model";

export function curlCommands(
  url: string,
  adminToken: string,
): string {
  const chat = (stream: boolean) =>
    `curl ${
      stream ? "-N " : ""
    }${url}/v1/chat/completions -H 'Content-Type: application/json' -d '{"model":"${MODEL}","stream":${stream},"messages":[{"role":"user","content":"Hello!"}]}'`;
  return [
    "Streaming chat completion (words arrive one by one):",
    `  ${chat(true)}`,
    "Non-streaming chat completion:",
    `  ${chat(false)}`,
    "Anthropic Messages API:",
    `  curl ${url}/v1/messages -H 'Content-Type: application/json' -H 'anthropic-version: 2023-06-01' -d '{"model":"${MODEL}","max_tokens":32,"messages":[{"role":"user","content":"Hello!"}]}'`,
    "Models the workers serve:",
    `  curl ${url}/v1/models`,
    "Health (worker count, queue depth):",
    `  curl ${url}/health`,
    "",
    `Dashboard:    ${url}/dashboard   (admin token: ${adminToken})`,
    `Setup wizard: ${url}/setup`,
  ].join("\n");
}

function randomHex(bytes: number): string {
  return Array.from(
    crypto.getRandomValues(new Uint8Array(bytes)),
    (b) => b.toString(16).padStart(2, "0"),
  ).join("");
}

type DemoOptions =
  | { kind: "run"; port: number; delayMs: number; quiet: boolean }
  | { kind: "exit"; code: number };

function demoOptions(): DemoOptions {
  let values;
  try {
    values = parseArgs({
      args: Deno.args,
      options: {
        port: { type: "string", default: "8080" },
        "delay-ms": { type: "string", default: "40" },
        quiet: { type: "boolean", default: false },
        help: { type: "boolean", default: false },
      },
      strict: true,
    }).values;
  } catch (e) {
    console.error(`modelrelay demo: ${(e as Error).message} (see --help)`);
    return { kind: "exit", code: 2 };
  }
  if (values.help) {
    console.log(HELP);
    return { kind: "exit", code: 0 };
  }
  const port = Number(values.port);
  const delayMs = Number(values["delay-ms"]);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`modelrelay demo: --port must be 0-65535, got "${port}"`);
    return { kind: "exit", code: 2 };
  }
  if (!Number.isFinite(delayMs) || delayMs < 0) {
    console.error("modelrelay demo: --delay-ms must be a non-negative number");
    return { kind: "exit", code: 2 };
  }
  return { kind: "run", port, delayMs, quiet: values.quiet };
}

/**
 * The demo's children, stopped in reverse order, each exactly once. They run
 * in their own process groups, so a terminal's Ctrl-C reaches only this
 * process, which then stops them.
 */
function childGroup() {
  const children: Child[] = [];
  let stopping: Promise<void> | null = null;
  return {
    children,
    started(c: Child): void {
      children.push(c);
      console.log(`[demo] ${c.name} started (pid ${c.pid})`);
    },
    stopAll(): Promise<void> {
      stopping ??= stopInReverse(children, 15_000, (c, s) =>
        console.log(
          `[demo] ${c.name} (pid ${c.pid}) exited with code ${s.code}`,
        ));
      return stopping;
    },
  };
}

/** Resolves on the first SIGINT or SIGTERM; `received()` says whether one came. */
function firstSignal(): { arrived: Promise<void>; received(): boolean } {
  let signalled = false;
  const arrived = new Promise<void>((resolve) => {
    const onSignal = () => {
      if (signalled) return;
      signalled = true;
      console.log("\n[demo] stopping worker, server and mock backend…");
      resolve();
    };
    Deno.addSignalListener("SIGINT", onSignal);
    Deno.addSignalListener("SIGTERM", onSignal);
  });
  return { arrived, received: () => signalled };
}

async function main(): Promise<number> {
  const options = demoOptions();
  if (options.kind === "exit") return options.code;
  const { port, delayMs } = options;
  const secret = `demo-${randomHex(12)}`;
  const adminToken = `demo-admin-${randomHex(12)}`;
  const echo = (name: string) => (line: string) => {
    if (!options.quiet) console.log(`[${name}] ${line}`);
  };
  const { children, started, stopAll } = childGroup();
  const signal = firstSignal();

  try {
    const mock = await startMockProcess({
      delayMs,
      onLine: echo("mock"),
      detached: true,
    });
    started(mock.child);
    let server;
    try {
      server = await startServerProcess({
        secret,
        port,
        adminToken,
        onLine: echo("server"),
        detached: true,
      });
    } catch (e) {
      console.error(
        `modelrelay demo: the server did not start${
          port !== 0 ? ` (is port ${port} taken? try --port 0)` : ""
        }\n${(e as Error).message}`,
      );
      return 1;
    }
    started(server.child);
    const worker = await startWorkerProcess({
      name: "demo-worker",
      serverUrl: server.url,
      secret,
      backendUrl: mock.url,
      onLine: echo("worker"),
      detached: true,
    });
    started(worker);
    await waitUntil(
      "the worker to serve the mock model",
      async () =>
        (await workersConnected(server.url)) >= 1 &&
        (await (await fetch(`${server.url}/v1/models`)).text()).includes(
          MODEL,
        ),
    );
    console.log(
      [
        "",
        "=".repeat(72),
        `modelrelay demo is up: server ${server.url}, one worker, mock backend ${mock.url}`,
        `Worker secret (to connect another worker): ${secret}`,
        "",
        curlCommands(server.url, adminToken),
        "",
        "Press Ctrl-C to stop all three.",
        "=".repeat(72),
        "",
      ].join("\n"),
    );
    const childDied = Promise.race(
      children.map((c) => c.status.then(() => c)),
    );
    const first = await Promise.race([signal.arrived, childDied]);
    if (first !== undefined && !signal.received()) {
      console.error(
        `modelrelay demo: ${first.name} exited unexpectedly (code ${first.exited?.code}); stopping the others`,
      );
      return 1;
    }
    return 0;
  } catch (e) {
    console.error(`modelrelay demo: ${(e as Error).message}`);
    return 1;
  } finally {
    await stopAll();
  }
}

if (import.meta.main) Deno.exit(await main());
