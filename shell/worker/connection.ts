// The worker's I/O: the WebSocket to the proxy, backend fetches, timers and the
// event loop around `step`. Callbacks only translate I/O into events; every
// decision is in core/worker/decide.ts. Events raised while actions run are queued and
// handled after the current batch, never re-entrantly.
// The `ws` package rather than Deno's WebSocket (issue 10, measured): Deno's
// client socket has no TCP_NODELAY, so a chunk frame sent right after another
// waited for the proxy's delayed ACK, ~40 ms. `ws` sets it.
// @ts-types="npm:@types/ws@8.18.1"
import { WebSocket } from "ws";
import { assertNever } from "../../core/assert_never.ts";
import { encodeFrame, EXTENSION_BODY_CHUNKS } from "../../core/protocol/mod.ts";
import { type Corkable, makeFrameBatcher } from "../frame_batch.ts";
import type { Logger } from "../log.ts";
import { forwardToBackend, listBackendModels } from "./backend_client.ts";
import type { WorkerConfig } from "./config.ts";
import { CAPABILITIES_INTERVAL_MS, makeLifecycle } from "./lifecycle/mod.ts";
import {
  FRAME_CHARS_MAX,
  initialWorkerState,
  step,
  type TimerName,
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

/**
 * Unsent bytes on the proxy socket above which backend reads pause: a backend
 * faster than the link (or a huge answer) must not pile up in the worker.
 */
const SEND_BUFFER_BYTES_MAX = 8 * 1024 * 1024;

/** How long a graceful exit waits for the proxy to answer our close frame. */
const CLOSE_WAIT_MS = 2_000;

type Timer = ReturnType<typeof setTimeout>;

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
  const backend = { url: config.backendUrl, apiKey: config.backendApiKey };
  const queue: WorkerEvent[] = [];
  let running = false;
  let stopped = false;
  let socket: WebSocket | null = null;
  /** `socket`'s TCP socket: frames of one turn leave in one write (frame_batch.ts). */
  let rawSocket: Corkable | null = null;
  const batcher = makeFrameBatcher();
  const backendCalls = new Map<string, AbortController>();
  const pending = new Set<Promise<unknown>>();
  const timers = new Map<TimerName, Timer>();
  const stopAll = new AbortController();
  let refreshInterval: ReturnType<typeof setInterval> | null = null;
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
    if (stopped) return;
    queue.push(event);
    if (running) return;
    running = true;
    try {
      for (
        let e = queue.shift();
        e !== undefined && !stopped;
        e = queue.shift()
      ) {
        for (const action of step(state, e)) run(action);
      }
    } finally {
      running = false;
    }
  }

  function track(p: Promise<unknown>): void {
    pending.add(p);
    p.finally(() => pending.delete(p));
  }

  function connect(): void {
    let wasOpen = false;
    const ws = new WebSocket(config.connectUrl, {
      headers: { "X-Worker-Secret": config.workerSecret },
      // A UTF-8 character is at most 4 bytes; decode.ts enforces the limit.
      maxPayload: FRAME_CHARS_MAX * 4,
      perMessageDeflate: false,
    });
    socket = ws;
    rawSocket = null;
    ws.on("upgrade", (res) => {
      if (socket === ws) rawSocket = res.socket;
    });
    ws.onopen = () => {
      wasOpen = true;
      dispatch({ kind: "socketOpened" });
    };
    ws.onmessage = (m) => {
      if (typeof m.data === "string") {
        dispatch({ kind: "frameReceived", text: m.data });
      } else deps.log("warn", "ignored a binary frame from the proxy");
    };
    ws.onerror = () => {}; // A close event always follows and carries the code.
    ws.onclose = (c) => {
      if (socket === ws) {
        socket = null;
        rawSocket = null;
      }
      dispatch({
        kind: "socketClosed",
        code: c.code,
        reason: c.reason,
        wasOpen,
        random01: deps.random(),
      });
    };
  }

  /** Whether the socket to the proxy can take more answer bytes now. */
  function hasRoom(): boolean {
    return (socket?.bufferedAmount ?? 0) < SEND_BUFFER_BYTES_MAX;
  }

  function forward(action: Extract<WorkerAction, { kind: "forward" }>): void {
    const id = action.request.request_id;
    const controller = new AbortController();
    backendCalls.set(id, controller);
    track(
      forwardToBackend(backend, action.request, controller.signal, {
        chunk: (chunk) => dispatch({ kind: "chunkRead", requestId: id, chunk }),
        // The extension is read per request: a reconnect may reach another server.
        bodyChunks: state.extensions.includes(EXTENSION_BODY_CHUNKS),
        hasRoom,
      }).then((outcome) => {
        if (backendCalls.get(id) === controller) backendCalls.delete(id);
        switch (outcome.kind) {
          case "completed":
            return dispatch({
              kind: "backendFinished",
              requestId: id,
              completion: outcome.completion,
            });
          case "failed":
            return dispatch({
              kind: outcome.code === "backend_unavailable"
                ? "backendUnavailable"
                : "backendStreamBroken",
              requestId: id,
              message: outcome.message,
            });
          case "cancelled":
            return;
          default:
            return assertNever(outcome);
        }
      }),
    );
  }

  function listModels(reply: boolean): void {
    track(
      listBackendModels(backend, stopAll.signal).then(
        (listed) => dispatch({ kind: "modelsListed", models: listed, reply }),
        (e: unknown) =>
          dispatch({
            kind: "modelsListFailed",
            message: (e as Error).message,
            reply,
          }),
      ),
    );
  }

  /**
   * When each armed timer is due (performance.now() ms). Re-arming a timer that
   * fires no later than the new deadline only moves the deadline; the timer
   * re-arms itself for the rest when it fires early. The idle watchdog is re-armed
   * on every frame, and a clearTimeout + setTimeout per frame was ~7 µs a request
   * in the worker's (d) profile (issue 10).
   */
  const deadlines = new Map<TimerName, number>();
  const firesAt = new Map<TimerName, number>();

  function fireTimer(timer: TimerName): void {
    const due = deadlines.get(timer);
    if (due === undefined) return;
    const now = performance.now();
    if (due > now) {
      schedule(timer, due - now, due);
      return;
    }
    timers.delete(timer);
    deadlines.delete(timer);
    firesAt.delete(timer);
    dispatch(
      timer === "drain"
        ? { kind: "drainTimerFired" }
        : timer === "idle"
        ? { kind: "idleTimerFired" }
        : { kind: "reconnectTimerFired" },
    );
  }

  function schedule(timer: TimerName, ms: number, due: number): void {
    clearTimeout(timers.get(timer));
    firesAt.set(timer, due);
    timers.set(timer, setTimeout(() => fireTimer(timer), ms));
  }

  function armTimer(timer: TimerName, ms: number): void {
    const due = performance.now() + ms;
    deadlines.set(timer, due);
    const at = firesAt.get(timer);
    if (timers.has(timer) && at !== undefined && at <= due) return;
    schedule(timer, ms, due);
  }

  function run(action: WorkerAction): void {
    switch (action.kind) {
      case "connect":
        connect();
        return;
      case "send":
        if (socket?.readyState === WebSocket.OPEN) {
          if (rawSocket !== null) batcher.hold(rawSocket);
          socket.send(encodeFrame(action.message));
        }
        return;
      case "forward":
        forward(action);
        return;
      case "abortBackend":
        backendCalls.get(action.requestId)?.abort();
        backendCalls.delete(action.requestId);
        return;
      case "listModels":
        listModels(action.reply);
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
        armTimer(action.timer, action.ms);
        return;
      case "closeSocket":
        if (socket !== null && socket.readyState <= WebSocket.OPEN) {
          socket.close(action.code, action.reason);
        }
        return;
      case "dropSocket":
        socket?.terminate(); // its close event carries on as a normal disconnect
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
    if (stopped) return;
    stopped = true;
    for (const t of timers.values()) clearTimeout(t);
    timers.clear();
    if (refreshInterval !== null) clearInterval(refreshInterval);
    clearInterval(capabilitiesInterval);
    for (const c of backendCalls.values()) c.abort();
    backendCalls.clear();
    stopAll.abort();
    const ws = socket;
    const closed = ws === null || ws.readyState === WebSocket.CLOSED
      ? Promise.resolve()
      : new Promise<void>((resolve) => {
        ws.addEventListener("close", () => resolve(), { once: true });
        if (ws.readyState <= WebSocket.OPEN) {
          ws.close(1000, "worker shutting down");
        }
      });
    let timer: Timer | undefined;
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
  connect();
  return { done, signal: () => dispatch({ kind: "shutdownSignalled" }) };
}
