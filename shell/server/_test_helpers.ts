// Test-only helpers: a real server on an ephemeral loopback port and a scripted
// WebSocket worker that speaks the wire protocol by hand.
import { makeConfig } from "../../core/mod.ts";
import { makeLogger } from "../log.ts";
import {
  DEFAULT_TRUSTED_PROXIES,
  parseTrustedProxies,
} from "./http/client_address.ts";
import type { ServerConfig } from "./config.ts";
import { type RunningServer, type ServerHooks, startServer } from "./server.ts";
import { waitFor } from "../procs.ts";
import { withClosing } from "../with_closing.ts";

export const SECRET = "test-secret";

export function testConfig(
  core: Partial<ServerConfig["core"]> = {},
  rest: Partial<ServerConfig> = {},
): ServerConfig {
  return {
    hostname: "127.0.0.1",
    port: 0,
    workerSecret: SECRET,
    logLevel: "error",
    logFormat: "text",
    adminToken: "",
    requireApiKeys: false,
    dbPath: ":memory:",
    maxBodyBytes: 1024 * 1024,
    clientBufferBytes: 4 * 1024 * 1024,
    tickMs: 20,
    trustedProxies: parseTrustedProxies(DEFAULT_TRUSTED_PROXIES),
    bodyTimeoutMs: 30_000,
    maxConnections: 1000,
    core: makeConfig(core),
    ...rest,
  };
}

export type TestServer = RunningServer & { url: string; wsUrl: string };

export async function startTestServer(
  config: ServerConfig = testConfig(),
  hooks: ServerHooks = {},
): Promise<TestServer> {
  const server = await startServer(
    config,
    makeLogger(config.logLevel, "text", "test"),
    hooks,
  );
  return withAddresses(server);
}

/** `running` with the URLs its clients and workers connect to. */
export function withAddresses<T extends { port: number }>(
  running: T,
): T & { url: string; wsUrl: string } {
  const base = `127.0.0.1:${running.port}`;
  return {
    ...running,
    url: `http://${base}`,
    wsUrl: `ws://${base}/v1/worker/connect`,
  };
}

/** A test server with `config`, closed after `fn` whatever it throws. */
export function withTestServer(
  config: ServerConfig,
  fn: (server: TestServer) => Promise<void>,
): Promise<void> {
  return withClosing(startTestServer(config), fn);
}

/** The one bounded wait for in-process conditions (shell/procs.ts), as the server tests have always imported it. */
export { waitFor };

export type Frame = Record<string, unknown> & { type: string };

export type TestWorker = {
  ws: WebSocket;
  frames: Frame[];
  closed: Promise<CloseEvent>;
  send(frame: Record<string, unknown>): void;
  /** Next frame of this type not yet taken. */
  next(type: string, timeoutMs?: number): Promise<Frame>;
  /** Answers `request` with a response_complete (status 200 unless given). */
  complete(
    request: Frame,
    status?: number,
    body?: string,
    headers?: Record<string, string>,
  ): void;
  close(): Promise<void>;
};

export async function connectWorker(
  server: TestServer,
  opts: { secret?: string; provider?: string; query?: string } = {},
): Promise<TestWorker> {
  const q = opts.query ?? `provider=${opts.provider ?? "local"}`;
  const ws = new WebSocket(`${server.wsUrl}?${q}`, {
    headers: { "x-worker-secret": opts.secret ?? SECRET },
  } as unknown as string[]);
  const frames: Frame[] = [];
  const taken = new Set<Frame>();
  ws.onmessage = (e) => frames.push(JSON.parse(e.data as string));
  const closed = new Promise<CloseEvent>((r) =>
    ws.addEventListener("close", (e) => r(e))
  );
  await new Promise<void>((resolve, reject) => {
    ws.onopen = () => resolve();
    ws.onerror = () => reject(new Error("worker socket failed to open"));
  });
  const worker: TestWorker = {
    ws,
    frames,
    closed,
    send: (frame) => ws.send(JSON.stringify(frame)),
    complete(request, status = 200, body, headers) {
      ws.send(JSON.stringify({
        type: "response_complete",
        request_id: request.request_id,
        status_code: status,
        ...(headers === undefined ? {} : { headers }),
        ...(body === undefined ? {} : { body }),
      }));
    },
    async next(type, timeoutMs = 5000) {
      let found: Frame | undefined;
      await waitFor(`a ${type} frame`, () => {
        found = frames.find((f) => f.type === type && !taken.has(f));
        return found !== undefined;
      }, timeoutMs);
      taken.add(found!);
      return found!;
    },
    async close() {
      if (ws.readyState === WebSocket.OPEN) ws.close(1000, "test done");
      await closed;
    },
  };
  return worker;
}

/** Connects and registers; resolves with the worker and its register_ack. */
export async function registeredWorker(
  server: TestServer,
  register: Record<string, unknown> = {},
): Promise<TestWorker & { ack: Frame }> {
  const w = await connectWorker(server);
  w.send({
    type: "register",
    worker_name: "test-worker",
    models: ["m1"],
    max_concurrent: 2,
    protocol_version: "2026-04-bridge-v1",
    current_load: 0,
    ...register,
  });
  const ack = await w.next("register_ack");
  return Object.assign(w, { ack });
}

/**
 * A worker registered (`register` as in registeredWorker) on the server
 * `start` resolves to, for the length of `fn`; both closed after it whatever
 * it throws, the worker first.
 */
export function withRegisteredWorker<S extends TestServer>(
  start: Promise<S>,
  register: Record<string, unknown>,
  fn: (server: S, w: TestWorker & { ack: Frame }) => Promise<void>,
): Promise<void> {
  return withClosing(start, async (server) => {
    const w = await registeredWorker(server, register);
    try {
      await fn(server, w);
    } finally {
      await w.close();
    }
  });
}

export function chatBody(model = "m1", stream = false): string {
  return JSON.stringify({
    model,
    stream,
    messages: [{ role: "user", content: "hi" }],
  });
}

/** POST a chat completion body to the server, as a client would (`init` adds headers, a signal, …). */
export function postChat(
  server: TestServer,
  body: string = chatBody(),
  init: RequestInit = {},
): Promise<Response> {
  return fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    body,
    ...init,
  });
}

/**
 * On a server with queueLenMax 1 whose only worker `w` takes one request at a
 * time: one request busy on `w`, one queued, and a third that the full queue
 * refuses (`rejected`). `drain` answers the busy one ("1") and then the queued
 * one ("2"), checks the busy one's body, and resolves with the queued one's
 * response, unread.
 */
export async function overfullQueue(
  server: TestServer,
  w: TestWorker,
): Promise<{ rejected: Response; drain: () => Promise<Response> }> {
  const busy = postChat(server, chatBody());
  const r1 = await w.next("request");
  const queued = postChat(server, chatBody());
  await waitFor(
    "one queued request",
    () => server.runtime.state.queues.get("local")!.length === 1,
  );
  const rejected = await postChat(server, chatBody());
  const drain = async () => {
    w.complete(r1, 200, "1");
    const busyText = await (await busy).text();
    if (busyText !== "1") throw new Error(`busy answered ${busyText}`);
    const r2 = await w.next("request");
    w.complete(r2, 200, "2");
    return await queued;
  };
  return { rejected, drain };
}

/**
 * A streaming chat request that `w` takes and starts with one chunk
 * ("data: 1\n\n"); resolves with the request frame and the response, its head
 * received and its body unread.
 */
export async function startedStream(
  server: TestServer,
  w: TestWorker,
): Promise<{ req: Frame; res: Response }> {
  const pending = postChat(server, chatBody("m1", true));
  const req = await w.next("request");
  w.send({
    type: "response_chunk",
    request_id: req.request_id,
    chunk: "data: 1\n\n",
  });
  return { req, res: await pending };
}
