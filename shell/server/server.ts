// Wires the shell together: one node:http server for clients and the worker
// WebSocket endpoint, one runtime driving the core, one tick timer.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
// @ts-types="npm:@types/ws@8.18.1"
import type { WebSocket } from "ws";
import { type Effect, type Event, initialState } from "../../core/mod.ts";
import type { Logger } from "../log.ts";
import { handleHttp, type HttpDeps } from "./client_http.ts";
import type { Clients, LifecycleCallers } from "./clients.ts";
import { capConnections } from "./connection_cap.ts";
import { nowMs } from "./clock.ts";
import type { ServerConfig } from "./config.ts";
import { type Corkable, makeFrameBatcher } from "../frame_batch.ts";
import { answerUnparsable, closeIfBodyUnread, sendJson } from "./http_reply.ts";
import { makeEffectRunner } from "./run_effects.ts";
import { makeRuntime, type Runtime } from "./runtime.ts";
import { makeWorkerUpgrade } from "./worker_socket.ts";

/**
 * Below this a worker secret can be guessed: the auth throttle never refuses a
 * correct secret (issue 15), so the secret's length is the defence.
 */
export const SHORT_SECRET_CHARS = 16;

export type RunningServer = {
  port: number;
  hostname: string;
  runtime: Runtime;
  /** Cluster mode only (issue 16): notes and membership for keys and nonces. */
  cluster?: import("./cluster/runtime.ts").ClusterRuntime;
  /** Starts a graceful shutdown (C30); resolves when it completed. */
  shutdown(): Promise<void>;
  /** Stops at once: closes every socket and the listener. */
  close(): Promise<void>;
};

export type ServerHooks = {
  onRequestFinished?: (e: Extract<Effect, { kind: "requestFinished" }>) => void;
  /** Taps for metrics: every event before it is submitted, every effect after it ran. */
  onEvent?: (event: Event) => void;
  onEffect?: (effect: Effect) => void;
  extraRoutes?: HttpDeps["extraRoutes"];
  authorize?: HttpDeps["authorize"];
  /** Lifecycle calls awaiting their answer, registered by the lifecycle routes. */
  lifecycleCallers?: LifecycleCallers;
};

export async function startServer(
  config: ServerConfig,
  log: Logger,
  hooks: ServerHooks = {},
): Promise<RunningServer> {
  const state = initialState(config.core, nowMs());
  const clients: Clients = new Map();
  const lifecycleCallers: LifecycleCallers = hooks.lifecycleCallers ??
    new Map();
  const sockets = new Map<string, WebSocket>();
  const rawSockets = new WeakMap<WebSocket, Corkable>();
  const batcher = makeFrameBatcher();
  let resolveShutdown = () => {};
  const shutdownDone = new Promise<void>((r) => resolveShutdown = r);
  // Late-bound so the effect runner can submit follow-up events.
  let submit = (_e: Parameters<Runtime["submit"]>[0]) => {};
  const server = createServer((req, res) => {
    if (connections.refuseRequest(req, res)) return;
    closeIfBodyUnread(req, res);
    try {
      handleHttp(req, res, httpDeps);
    } catch (e) {
      // Our bug: one request fails, loudly, and the server keeps serving.
      log("error", "request handler failed", { error: String(e) });
      if (!res.headersSent) {
        sendJson(res, 500, {
          error: {
            message: "internal error",
            type: "server_error",
            code: "internal_error",
          },
        });
      } else res.destroy();
    }
  });
  server.on("clientError", answerUnparsable);
  const connections = capConnections(server, config.maxConnections);
  const upgrade = makeWorkerUpgrade({
    sockets,
    rawSockets,
    submit: (e) => submit(e),
    now: nowMs,
    workerSecret: config.workerSecret,
    defaultProvider: config.core.defaultProvider,
    frameCharsMax: config.core.frameCharsMax,
    trustedProxies: config.trustedProxies,
    isRegistered: (id) => state.workers.has(id),
    cap: connections,
  });
  const runEffect = makeEffectRunner({
    clients,
    lifecycleCallers,
    sockets,
    batch: (ws) => {
      const raw = rawSockets.get(ws);
      if (raw !== undefined) batcher.hold(raw);
    },
    log,
    clientBufferBytes: config.clientBufferBytes,
    submit: (e) => submit(e),
    now: nowMs,
    onRequestFinished: hooks.onRequestFinished ?? (() => {}),
    onShutdownComplete: () => resolveShutdown(),
    admission: upgrade.admission,
  });
  const { onEvent, onEffect } = hooks;
  const tapped = onEffect === undefined ? runEffect : (e: Effect) => {
    runEffect(e);
    onEffect(e);
  };
  // Issue 16: with CLUSTER_URL the runtime shares its input through Redis; the
  // cluster code (and ioredis) is loaded only then.
  const cluster = config.clusterUrl === undefined
    ? null
    : await (await import("./cluster/start.ts")).startCluster(
      config,
      {
        state,
        clients,
        sockets,
        workerPending: upgrade.admission.pending,
        runEffect: tapped,
        log,
      },
    );
  const runtime: Runtime = cluster ?? makeRuntime(state, tapped, log);
  const submitEvent = onEvent === undefined ? runtime.submit : (e: Event) => {
    try {
      onEvent(e);
    } catch (err) {
      log("error", "event tap failed", { event: e.kind, error: String(err) });
    }
    runtime.submit(e);
  };
  submit = submitEvent;

  const httpDeps: HttpDeps = {
    state,
    clients,
    submit: submitEvent,
    now: nowMs,
    maxBodyBytes: config.maxBodyBytes,
    bodyTimeoutMs: config.bodyTimeoutMs,
    startedAtMs: nowMs(),
    corsAllowOrigins: config.corsAllowOrigins ?? ["*"],
    ...(hooks.extraRoutes === undefined
      ? {}
      : { extraRoutes: hooks.extraRoutes }),
    ...(hooks.authorize === undefined ? {} : { authorize: hooks.authorize }),
  };
  server.on("upgrade", upgrade.onUpgrade);
  server.keepAliveTimeout = 65_000;

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.port, config.hostname, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const tick = setInterval(
    () => runtime.submit({ kind: "tick", atMs: nowMs(), unixMs: Date.now() }),
    config.tickMs,
  );
  log("info", "server listening", {
    address: `${config.hostname}:${address.port}`,
    provider: config.core.defaultProvider,
  });
  if (config.workerSecret.length < SHORT_SECRET_CHARS) {
    log(
      "warn",
      `WORKER_SECRET is shorter than ${SHORT_SECRET_CHARS} characters: it is all that stops anyone from connecting a worker and receiving your clients' requests; use e.g. openssl rand -hex 24`,
      { length: config.workerSecret.length },
    );
  }

  let closed = false;
  async function close(): Promise<void> {
    if (closed) return;
    closed = true;
    clearInterval(tick);
    await cluster?.close();
    for (const ws of sockets.values()) ws.terminate();
    for (const c of clients.values()) c.res.destroy();
    for (const res of lifecycleCallers.values()) res.destroy();
    upgrade.close();
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }
  async function shutdown(): Promise<void> {
    runtime.submit({ kind: "shutdownRequested", atMs: nowMs() });
    await shutdownDone;
    await close();
  }
  return {
    port: address.port,
    hostname: config.hostname,
    runtime,
    ...(cluster === null ? {} : { cluster }),
    shutdown,
    close,
  };
}
