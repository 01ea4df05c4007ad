// The worker's I/O: the WebSocket to the proxy (proxy_link.ts), backend calls
// (backend_calls.ts), timers (timers.ts) and the event loop around `step`.
// Callbacks only translate I/O into events; every decision is in
// core/worker/decide.ts. The loop is the one driver (../driver.ts): events raised
// while actions run are queued, never handled re-entrantly. A failure there is a
// bug and propagates; the loop ends when the worker exits.
import { assertNever } from "../../core/assert_never.ts";
import { EXTENSION_BODY_CHUNKS } from "../../core/protocol/mod.ts";
import { makeDriver } from "../driver.ts";
import type { Logger } from "../log.ts";
import { makeBackendCalls } from "./backend_calls.ts";
import type { WorkerConfig } from "./config.ts";
import { CAPABILITIES_INTERVAL_MS, makeLifecycle } from "./lifecycle/mod.ts";
import { makeProxyLink } from "./proxy_link.ts";
import { makeWorkerTimers } from "./timers.ts";
import {
  initialWorkerState,
  step,
  type WorkerAction,
  type WorkerEvent,
} from "../../core/worker/decide.ts";

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
    drainTimeoutSecs: config.drainTimeoutSecs,
    onServerShutdown: config.onServerShutdown,
  });
  const driver = makeDriver({ state, step, run });
  const pending = new Set<Promise<unknown>>();
  const stopAll = new AbortController();
  let refreshInterval: ReturnType<typeof setInterval> | null = null;
  const link = makeProxyLink({
    connectUrl: config.connectUrl,
    workerSecret: config.workerSecret,
    dispatch,
    log: deps.log,
    random: deps.random,
  });
  const backend = makeBackendCalls({
    backend: { url: config.backendUrl, apiKey: config.backendApiKey },
    dispatch,
    track,
    bodyChunks: () => state.extensions.includes(EXTENSION_BODY_CHUNKS),
    hasRoom: () => link.hasRoom(),
    stopped: stopAll.signal,
  });
  const timers = makeWorkerTimers((timer) =>
    dispatch(
      timer === "drain"
        ? { kind: "drainTimerFired" }
        : timer === "idle"
        ? { kind: "idleTimerFired" }
        : { kind: "reconnectTimerFired" },
    )
  );
  const lifecycle = makeLifecycle(
    config.backendUrl,
    config.backendApiKey,
    stopAll.signal,
  );
  const capabilitiesInterval = setInterval(
    () => dispatch({ kind: "capabilitiesDue" }),
    CAPABILITIES_INTERVAL_MS,
  );
  let resolveDone: (code: number) => void = () => {};
  const done = new Promise<number>((resolve) => resolveDone = resolve);

  function dispatch(event: WorkerEvent): void {
    driver.submit(event);
  }

  function track(p: Promise<unknown>): void {
    pending.add(p);
    p.finally(() => pending.delete(p));
  }

  function run(action: WorkerAction): void {
    switch (action.kind) {
      case "connect":
        link.connect();
        return;
      case "send":
        link.send(action.message);
        return;
      case "forward":
        backend.forward(action.request);
        return;
      case "abortBackend":
        backend.abort(action.requestId);
        return;
      case "listModels":
        backend.listModels(action.reply);
        return;
      case "probeCapabilities":
        track(
          lifecycle.capabilities().then((capabilities) => {
            if (capabilities !== null) {
              dispatch({ kind: "capabilitiesRead", capabilities });
            }
          }),
        );
        return;
      case "runLifecycle": {
        const taskId = action.request.task_id;
        track(
          lifecycle.run(
            action.request,
            (u) => dispatch({ kind: "lifecycleUpdate", taskId, ...u }),
          ),
        );
        return;
      }
      case "armTimer":
        timers.arm(action.timer, action.ms);
        return;
      case "closeSocket":
        link.close(action.code, action.reason);
        return;
      case "dropSocket":
        link.terminate();
        return;
      case "exit":
        stop(action.code, action.graceful);
        return;
      case "log":
        deps.log(action.level, action.message, action.fields);
        return;
      default:
        return assertNever(action);
    }
  }

  function stop(code: number, graceful: boolean): void {
    if (driver.stopped) return;
    driver.stop();
    timers.clearAll();
    if (refreshInterval !== null) clearInterval(refreshInterval);
    clearInterval(capabilitiesInterval);
    backend.abortAll();
    stopAll.abort();
    const closed = link.closeForExit();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const bounded = graceful
      ? Promise.race([
        closed,
        new Promise<void>((r) => timer = setTimeout(r, CLOSE_WAIT_MS)),
      ])
      : Promise.resolve();
    // Let aborted fetches settle so nothing outlives `done`.
    bounded.then(() => Promise.allSettled([...pending])).then(() => {
      clearTimeout(timer);
      resolveDone(code);
    });
  }

  if (state.modelsDiscovered && config.modelsRefreshSecs > 0) {
    refreshInterval = setInterval(
      () => dispatch({ kind: "modelsRefreshDue" }),
      config.modelsRefreshSecs * 1000,
    );
  }
  link.connect();
  return { done, signal: () => dispatch({ kind: "shutdownSignalled" }) };
}
