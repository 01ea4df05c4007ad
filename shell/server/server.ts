// Wires the shell together: one node:http server for clients and the worker
// WebSocket endpoint, one runtime driving the core, one tick timer.
import {
  createServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import {
  apiError,
  type Effect,
  type Event,
  initialState,
  type State,
} from "../../core/mod.ts";
import type { Logger } from "../log.ts";
import { handleHttp, type HttpDeps } from "./http/client_http.ts";
import type { Clients, LifecycleCallers } from "./http/clients.ts";
import { capConnections, type ConnectionCap } from "./http/connection_cap.ts";
import { nowMs } from "./clock.ts";
import {
  NO_TIMEOUT_MS,
  type ServerConfig,
  UNLIMITED_QUEUE_LEN,
} from "./config.ts";
import {
  answerUnparsable,
  closeIfBodyUnread,
  replyError,
} from "./http/http_reply.ts";
import { type EffectDeps, makeEffectRunner } from "./run_effects.ts";
import { makeRuntime, type Runtime } from "./runtime.ts";
import type { ClusterRuntime } from "./cluster/runtime.ts";
import type { RuntimeDeps } from "./cluster/start.ts";
import {
  makeWorkerUpgrade,
  type WorkerUpgrade,
} from "./worker_door/worker_socket.ts";
import { nodeUpgrade } from "./worker_door/node_upgrade.ts";
import type { WsConnection } from "../ws/connection.ts";

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
  cluster?: ClusterRuntime;
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
  /** Issue 26: traceparent for each request (ops/tracing.ts). */
  trace?: HttpDeps["trace"];
  /** Lifecycle calls awaiting their answer, registered by the lifecycle routes. */
  lifecycleCallers?: LifecycleCallers;
  /** Runs once the runtime is up, before the port opens (issue 23: the cluster's API keys load here). */
  beforeListen?: (cluster: ClusterRuntime | null) => Promise<void>;
  /** Issue 32: a client API key admits a worker (API_KEYS_AS_WORKER_SECRET); absent = never. */
  workerKeyValid?: (key: string) => boolean;
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
  const sockets = new Map<string, WsConnection>();
  let resolveShutdown = () => {};
  const shutdownDone = new Promise<void>((r) => resolveShutdown = r);
  // Late-bound so the effect runner can submit follow-up events.
  let submit = (_e: Event) => {};
  const server = createServer((req, res) =>
    serveClient(req, res, connections, httpDeps, log)
  );
  server.on("clientError", answerUnparsable);
  const connections = capConnections(server, config.maxConnections);
  const upgrade = makeWorkerUpgrade({
    sockets,
    submit: (e) => submit(e),
    now: nowMs,
    workerSecret: config.workerSecret,
    ...(hooks.workerKeyValid ? { workerKeyValid: hooks.workerKeyValid } : {}),
    defaultProvider: config.core.defaultProvider,
    frameCharsMax: config.core.frameCharsMax,
    isRegistered: (id) => state.workers.has(id),
    answerTimeoutMs: config.core.registerTimeoutMs,
  });
  const runEffect = effectRunnerFor(config, hooks, {
    clients,
    lifecycleCallers,
    sockets,
    log,
    submit: (e) => submit(e),
    onShutdownComplete: () => resolveShutdown(),
    admission: upgrade.admission,
  });
  const { runtime, cluster } = await startRuntime(config, {
    state,
    clients,
    sockets,
    workerPending: upgrade.admission.pending,
    workersPending: upgrade.admission.pendingIds,
    runEffect,
    log,
  });
  submit = withEventTap(runtime.submit, hooks.onEvent, log);
  try {
    await hooks.beforeListen?.(cluster);
  } catch (e) {
    await cluster?.close();
    throw e;
  }
  const httpDeps = httpDepsFor(config, state, clients, submit, hooks, cluster);
  server.on("upgrade", (req, socket, head) => {
    const u = nodeUpgrade(req, socket, head, {
      trustedProxies: config.trustedProxies,
      cap: connections,
    });
    // Issue 23: another instance's link for answer bytes, on this same port.
    if (cluster?.peerUpgrade(u) === true) return;
    upgrade.onUpgrade(u);
  });
  server.keepAliveTimeout = 65_000;

  const port = await listen(server, config);
  cluster?.advertise(advertisedUrl(config, port, log));
  const tick = setInterval(
    () => runtime.submit({ kind: "tick", atMs: nowMs(), unixMs: Date.now() }),
    config.tickMs,
  );
  announce(config, port, log);

  let closed = false;
  async function close(): Promise<void> {
    if (closed) return;
    closed = true;
    clearInterval(tick);
    await cluster?.close();
    await closeAll({ server, sockets, clients, lifecycleCallers, upgrade });
  }
  async function shutdown(): Promise<void> {
    runtime.submit({ kind: "shutdownRequested", atMs: nowMs() });
    await shutdownDone;
    await close();
  }
  return {
    port,
    hostname: config.hostname,
    runtime,
    ...(cluster === null ? {} : { cluster }),
    shutdown,
    close,
  };
}

/** Cuts every worker socket, client and lifecycle caller, then the listener. */
async function closeAll(
  { server, sockets, clients, lifecycleCallers, upgrade }: {
    server: Server;
    sockets: Map<string, WsConnection>;
    clients: Clients;
    lifecycleCallers: LifecycleCallers;
    upgrade: WorkerUpgrade;
  },
): Promise<void> {
  for (const ws of sockets.values()) ws.terminate();
  for (const c of clients.values()) c.res.destroy();
  for (const res of lifecycleCallers.values()) res.destroy();
  upgrade.close();
  await new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** One client request; a throw is our bug: that request fails, loudly, and the server keeps serving. */
function serveClient(
  req: IncomingMessage,
  res: ServerResponse,
  connections: ConnectionCap,
  httpDeps: HttpDeps,
  log: Logger,
): void {
  if (connections.refuseRequest(req, res)) return;
  closeIfBodyUnread(req, res);
  try {
    handleHttp(req, res, httpDeps);
  } catch (e) {
    log("error", "request handler failed", { error: String(e) });
    if (!res.headersSent) {
      replyError(
        res,
        apiError("internal_error", { what: "request handler failed" }),
      );
    } else res.destroy();
  }
}

/**
 * The local runtime, or with CLUSTER_URL (issue 16) the cluster runtime that
 * shares its input through Redis; the cluster code (and ioredis) is loaded only
 * then.
 */
async function startRuntime(
  config: ServerConfig,
  deps: RuntimeDeps,
): Promise<{ runtime: Runtime; cluster: ClusterRuntime | null }> {
  if (config.clusterUrl === undefined) {
    return {
      runtime: makeRuntime(deps.state, deps.runEffect, deps.log),
      cluster: null,
    };
  }
  const { startCluster } = await import("./cluster/start.ts");
  const cluster = await startCluster(config, deps);
  return { runtime: cluster, cluster };
}

/** Runs each effect, then the metrics tap (`hooks.onEffect`) on it. */
function effectRunnerFor(
  config: ServerConfig,
  hooks: ServerHooks,
  deps: Pick<
    EffectDeps,
    | "clients"
    | "lifecycleCallers"
    | "sockets"
    | "log"
    | "submit"
    | "onShutdownComplete"
    | "admission"
  >,
): (effect: Effect) => void {
  const runEffect = makeEffectRunner({
    ...deps,
    clientBufferBytes: config.clientBufferBytes,
    now: nowMs,
    onRequestFinished: hooks.onRequestFinished ?? (() => {}),
  });
  const { onEffect } = hooks;
  if (onEffect === undefined) return runEffect;
  return (e) => {
    runEffect(e);
    onEffect(e);
  };
}

/** The metrics tap on events: called before each event is submitted; its failure is logged, never fatal. */
function withEventTap(
  submit: (event: Event) => void,
  onEvent: ((event: Event) => void) | undefined,
  log: Logger,
): (event: Event) => void {
  if (onEvent === undefined) return submit;
  return (e) => {
    try {
      onEvent(e);
    } catch (err) {
      log("error", "event tap failed", { event: e.kind, error: String(err) });
    }
    submit(e);
  };
}

function httpDepsFor(
  config: ServerConfig,
  state: State,
  clients: Clients,
  submit: (event: Event) => void,
  hooks: ServerHooks,
  cluster: ClusterRuntime | null,
): HttpDeps {
  return {
    state,
    clients,
    submit,
    now: nowMs,
    maxBodyBytes: config.maxBodyBytes,
    bodyTimeoutMs: config.bodyTimeoutMs,
    startedAtMs: nowMs(),
    corsAllowOrigins: config.corsAllowOrigins ?? ["*"],
    forwardPathPrefixes: config.forwardPathPrefixes ?? [],
    ...(hooks.extraRoutes === undefined
      ? {}
      : { extraRoutes: hooks.extraRoutes }),
    ...(hooks.authorize === undefined ? {} : { authorize: hooks.authorize }),
    ...(hooks.trace === undefined ? {} : { trace: hooks.trace }),
    ...(cluster === null ? {} : {
      clusterHealth: () => ({
        up: cluster.up,
        instance: cluster.instanceId,
        instances: cluster.cluster.instances.size,
      }),
    }),
  };
}

/** Resolves with the port listened on (config.port 0 picks one). */
async function listen(server: Server, config: ServerConfig): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.port, config.hostname, () => resolve());
  });
  return (server.address() as AddressInfo).port;
}

/** The queue's limits as the original's start line shows them: a 0 set is "none"/"unlimited". */
function limitsShown(config: ServerConfig): Record<string, string> {
  const secs = (ms: number) => ms >= NO_TIMEOUT_MS ? "none" : `${ms / 1000}s`;
  const c = config.core;
  return {
    queue_timeout: secs(c.queueTimeoutMs),
    request_timeout: secs(c.requestTimeoutMs),
    max_queue_len: c.queueLenMax >= UNLIMITED_QUEUE_LEN
      ? "unlimited"
      : String(c.queueLenMax),
  };
}

function announce(config: ServerConfig, port: number, log: Logger): void {
  log("info", "server listening", {
    address: `${config.hostname}:${port}`,
    provider: config.core.defaultProvider,
    ...limitsShown(config),
  });
  if (config.workerSecret.length < SHORT_SECRET_CHARS) {
    log(
      "warn",
      `WORKER_SECRET is shorter than ${SHORT_SECRET_CHARS} characters: it is all that stops anyone from connecting a worker and receiving your clients' requests; use e.g. openssl rand -hex 24`,
      { length: config.workerSecret.length },
    );
  }
}

/**
 * Where peers reach this instance when CLUSTER_ADVERTISE_URL is unset (issue
 * 23): the bound address, or loopback when bound to every interface (the
 * server has no permission to read the host's name), which only instances on
 * this same host can use: a fleet across hosts sets CLUSTER_ADVERTISE_URL.
 */
function advertisedUrl(
  config: ServerConfig,
  port: number,
  log: Logger,
): string {
  if (config.clusterAdvertiseUrl !== undefined) {
    return config.clusterAdvertiseUrl;
  }
  const h = config.hostname;
  if (h === "0.0.0.0" || h === "::" || h === "") {
    log(
      "warn",
      "CLUSTER_ADVERTISE_URL is unset: peers reach this instance on loopback only",
      { port },
    );
    return `http://127.0.0.1:${port}`;
  }
  return `http://${h.includes(":") ? `[${h}]` : h}:${port}`;
}
