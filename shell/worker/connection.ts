// The worker's I/O: the WebSocket to the proxy (proxy_link.ts), backend calls
// (backend_calls.ts), timers (timers.ts) and the event loop around `step`.
// Callbacks only translate I/O into events; every decision is in
// core/worker/decide.ts. The loop is the one driver (core/driver.ts): events raised
// while actions run are queued, never handled re-entrantly. A failure there is a
// bug and propagates; the loop ends when the worker exits.
import { assertNever } from "../../core/assert_never.ts";
import {
  EXTENSION_BODY_BYTES,
  EXTENSION_BODY_CHUNKS,
  EXTENSION_CHUNK_BYTES,
} from "../../core/protocol/mod.ts";
import { makeDriver } from "../../core/driver.ts";
import { keepsLevel, type Logger } from "../log.ts";
import { type BackendCalls, makeBackendCalls } from "./backend_calls.ts";
import type { WorkerConfig } from "./config.ts";
import { type Lifecycle, makeLifecycle } from "./lifecycle/mod.ts";
import { type Backend, listBackendModels } from "./backend_client.ts";
import { flavourOfKind } from "./usage_ask.ts";
import { makeProxyLink, type ProxyLink } from "./proxy_link.ts";
import { makeWorkerTimers, type WorkerTimers } from "./timers.ts";
import {
  initialWorkerState,
  startActions,
  step,
  type TimerName,
  type WorkerAction,
  type WorkerInput,
} from "../../core/worker/mod.ts";

export type WorkerDeps = {
  log: Logger;
  /** In [0, 1); backoff jitter. */
  random: () => number;
};

export type RunningWorker = {
  /** Resolves with the process exit code once the worker has stopped. */
  done: Promise<number>;
  /** What SIGTERM/SIGINT do: the first drains, the second stops at once. */
  signal(): void;
};

/** The worker's one clock: monotonic milliseconds since start (as the server's). */
const origin = performance.now();
function nowMs(): number {
  return Math.floor(performance.now() - origin);
}

/** How long a graceful exit waits for the proxy to answer our close frame. */
const CLOSE_WAIT_MS = 2_000;

export function startWorker(
  config: WorkerConfig,
  models: string[],
  deps: WorkerDeps,
): RunningWorker {
  const state = initialWorkerState({
    workerName: config.workerName,
    maxConcurrent: config.maxConcurrent,
    models,
    modelsDiscovered: config.models === null,
    modelsRefreshSecs: config.modelsRefreshSecs,
    drainTimeoutSecs: config.drainTimeoutSecs,
    onServerShutdown: config.onServerShutdown,
    endpointPrefixes: config.endpointPrefixes ?? [],
    maxResidentModels: config.maxResidentModels,
    autoLoad: config.autoLoad,
    logsDebug: keepsLevel(config.logLevel, "debug"),
  });
  const driver = makeDriver({
    state,
    step,
    run: (action: WorkerAction) => runAction(io, action),
  });
  const pending = new Set<Promise<unknown>>();
  const stopAll = new AbortController();
  const link = makeProxyLink({
    connectUrl: config.connectUrl,
    workerSecret: config.workerSecret,
    dispatch,
    log: deps.log,
    random: deps.random,
  });
  const backendRef: Backend = {
    url: config.backendUrl,
    apiKey: config.backendApiKey,
    headTimeoutMs: config.backendHeadTimeoutSecs * 1000,
  };
  const backend = makeBackendCalls({
    backend: backendRef,
    dispatch,
    track,
    bodyChunks: () => state.extensions.includes(EXTENSION_BODY_CHUNKS),
    chunkBytes: () => state.extensions.includes(EXTENSION_CHUNK_BYTES),
    bodyBytes: () => state.extensions.includes(EXTENSION_BODY_BYTES),
    hasRoom: () => link.hasRoom(),
    stopped: stopAll.signal,
  });
  const timers = makeWorkerTimers((timer) => dispatch(timerFired(timer)));
  const io: WorkerIo = {
    link,
    backend,
    timers,
    lifecycle: makeLifecycle(
      config.backendUrl,
      config.backendApiKey,
      stopAll.signal,
    ),
    dispatch,
    track,
    stop,
    log: deps.log,
  };
  identifyBackend(backendRef, io.lifecycle, stopAll.signal, track);
  let resolveDone: (code: number) => void = () => {};
  const done = new Promise<number>((resolve) => resolveDone = resolve);

  /** Stamps what happened with the worker's clock and steps it. */
  function dispatch(input: WorkerInput): void {
    driver.submit({ ...input, atMs: nowMs() });
  }

  function track(p: Promise<unknown>): void {
    pending.add(p);
    p.finally(() => pending.delete(p));
  }

  function stop(code: number, graceful: boolean): void {
    if (driver.stopped) return;
    driver.stop();
    timers.clearAll();
    backend.abortAll();
    stopAll.abort();
    settleAfterExit(link, graceful, pending).then(() => resolveDone(code));
  }

  for (const a of startActions(state)) runAction(io, a);
  return { done, signal: () => dispatch({ kind: "shutdownSignalled" }) };
}

/** What the worker's actions are carried out with. */
type WorkerIo = {
  link: ProxyLink;
  backend: BackendCalls;
  timers: WorkerTimers;
  lifecycle: Lifecycle;
  dispatch: (event: WorkerInput) => void;
  /** Keeps a call the worker's exit waits for. */
  track: (p: Promise<unknown>) => void;
  stop: (code: number, graceful: boolean) => void;
  log: Logger;
};

function runAction(io: WorkerIo, action: WorkerAction): void {
  switch (action.kind) {
    case "connect":
      io.link.connect();
      return;
    case "send":
      io.link.send(action.message);
      return;
    case "sendChunkBytes":
      io.link.sendChunkBytes(action.requestId, action.chunk);
      return;
    case "forward":
      io.backend.forward(action.request);
      return;
    case "abortBackend":
      io.backend.abort(action.requestId);
      return;
    case "listModels":
      io.backend.listModels(action.reply);
      return;
    case "probeCapabilities":
      io.track(
        io.lifecycle.capabilities().then((capabilities) => {
          if (capabilities !== null) {
            io.dispatch({ kind: "capabilitiesRead", capabilities });
          }
        }),
      );
      return;
    case "probeResidency":
      io.track(
        io.lifecycle.residency().then((residency) =>
          io.dispatch({ kind: "residencyRead", residency })
        ),
      );
      return;
    case "autoLoad": {
      const { model, evict } = action;
      io.track(
        io.lifecycle.autoLoad(model, evict).then((error) =>
          io.dispatch({ kind: "autoLoadDone", model, error })
        ),
      );
      return;
    }
    case "runLifecycle": {
      const taskId = action.request.task_id;
      io.track(
        io.lifecycle.run(
          action.request,
          (u) => io.dispatch({ kind: "lifecycleUpdate", taskId, ...u }),
        ),
      );
      return;
    }
    case "armTimer":
      io.timers.arm(action.timer, action.ms);
      return;
    case "closeSocket":
      io.link.close(action.code, action.reason);
      return;
    case "dropSocket":
      io.link.terminate();
      return;
    case "exit":
      io.stop(action.code, action.graceful);
      return;
    case "log":
      io.log(action.level, action.message, action.fields);
      return;
    default:
      return assertNever(action);
  }
}

function timerFired(timer: TimerName): WorkerInput {
  switch (timer) {
    case "drain":
      return { kind: "drainTimerFired" };
    case "idle":
      return { kind: "idleTimerFired" };
    case "reconnect":
      return { kind: "reconnectTimerFired" };
    case "handshake":
      return { kind: "handshakeTimerFired" };
    case "capabilities":
      return { kind: "capabilitiesDue" };
    case "modelsRefresh":
      return { kind: "modelsRefreshDue" };
    case "residency":
      return { kind: "residencyDue" };
    default:
      return assertNever(timer);
  }
}

/**
 * Resolves once the proxy socket is closed (a graceful exit waits up to
 * CLOSE_WAIT_MS for the proxy's answer) and the aborted calls settled, so
 * nothing outlives `done`.
 */
async function settleAfterExit(
  link: ProxyLink,
  graceful: boolean,
  pending: Set<Promise<unknown>>,
): Promise<void> {
  const closed = link.closeForExit();
  let timer: ReturnType<typeof setTimeout> | undefined;
  // Even at once, `pending` is read a microtask later: the exiting event's
  // remaining actions run first and may add to it.
  await (graceful
    ? Promise.race([
      closed,
      new Promise<void>((r) => timer = setTimeout(r, CLOSE_WAIT_MS)),
    ])
    : Promise.resolve());
  await Promise.allSettled([...pending]);
  clearTimeout(timer);
}

/**
 * Issue 33: what the backend is, for the usage ask (usage_ask.ts): the
 * lifecycle adapter's detection (which its capabilities reuse), else the
 * owner its GET /v1/models names. Until known, nothing is asked.
 */
function identifyBackend(
  backend: Backend,
  lifecycle: Lifecycle,
  signal: AbortSignal,
  track: (p: Promise<unknown>) => void,
): void {
  track(
    lifecycle.kind().then(async (kind) => {
      backend.flavour = flavourOfKind(kind);
      if (backend.flavour === null && !signal.aborted) {
        await listBackendModels(backend, signal).catch(() => {});
      }
    }),
  );
}
