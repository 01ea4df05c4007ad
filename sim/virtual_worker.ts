// A virtual worker host: the REAL worker core (core/worker/decide.ts `step`)
// behind a simulated transport, in front of a simulated backend
// (virtual_backend.ts). This file keeps only what the worker's shell does
// (sockets, timers, running the core's actions) plus the host's failure plan:
// crash at chunk k, network cuts, pongs that stop or lie, garbage frames, frames
// for requests that are not its own, duplicate completions, SIGTERM, and an
// original-style worker's habits (no extensions, no frame limit, silence or
// streaming on after a cancel). Its frames are encoded text that the run decodes
// with core's `eventFromFrame`, so the decoder is exercised too (§6, C33).
import {
  type Effect,
  encodeBinaryChunkFrame,
  encodeFrame,
  EXTENSION_CAPABILITIES,
  EXTENSION_CHUNK_BYTES,
  type WorkerId,
  type WorkerMessage,
} from "../core/mod.ts";
import { type Driver, makeDriver } from "../core/driver.ts";
import {
  initialWorkerState,
  step,
  type WorkerAction,
  type WorkerEvent,
  type WorkerInput,
  type WorkerState,
} from "../core/worker/mod.ts";
import {
  newSseEventPassage,
  type SseEventPassage,
} from "../core/protocol/sse_events.ts";
import type { Prng } from "./prng.ts";
import type { WorkerFault, WorkerSpec } from "./scenario.ts";
import { chunkText, VirtualBackend } from "./virtual_backend.ts";
import type { World } from "./world.ts";

export { chunkText };

const UTF8 = new TextEncoder();

/** Malformed frames of every decode error kind (C33), indexed by variant. */
export function garbageFrame(variant: number, maxChars: number): string {
  const frames = [
    "not json at all",
    "[1,2,3]",
    '{"type":"bogus"}',
    '{"type":"response_chunk","request_id":7}',
    '{"type":"pong","current_load":-4}',
    '{"type":"response_complete","request_id":"x","status_code":42}',
    '{"type":"register","worker_name":"again","models":["m1"],"max_concurrent":1}',
    "x".repeat(maxChars + 1),
    "",
    '{"type":"error"}',
  ];
  return frames[variant % frames.length]!;
}

export class VirtualWorker {
  readonly spec: WorkerSpec;
  readonly index: number;
  readonly #prng: Prng;
  readonly #world: World;
  readonly #backend: VirtualBackend;
  conn: WorkerId | null = null;
  #connCount = 0;
  /** The worker process: its core's state, null while no process runs. */
  #core: WorkerState | null = null;
  #chunksOnConn = 0;
  #lastDeliveryAtMs = 0;
  /** Cancelled requests whose 499 an original-style worker would never send. */
  #silenced = new Set<string>();
  /** Timer generations: re-arming a timer supersedes the earlier one. */
  #timers = new Map<string, number>();
  #timerGen = 0;
  /** Each stream's unfinished SSE event, held back (C60). */
  #events = new Map<string, SseEventPassage<string>>();
  /**
   * The process's driver (core/driver.ts, the shells' own loop): events raised
   * while actions run (a socket close, a models listing) are stepped after the
   * current batch. Null while no process runs; a process that dies stops it.
   */
  #driver: Driver<WorkerEvent> | null = null;
  /** The time of the event that started the driver's current batch. */
  #now: number | null = null;

  constructor(spec: WorkerSpec, index: number, prng: Prng, world: World) {
    this.spec = spec;
    this.index = index;
    this.#prng = prng;
    this.#world = world;
    this.#backend = new VirtualBackend(spec, index, prng, world, {
      report: (now, e) => this.#step(now, e),
      sendOrphanFrame: (now, conn, text) => {
        if (conn === this.conn) this.#send(now, text);
      },
      crash: (now, reason) => this.crash(now, reason),
      faultsOn: (now) => this.#world.faultsOn(now),
      errorShare: (now) => this.#fault("errorReplies", now),
    });
  }

  get connected(): boolean {
    return this.conn !== null;
  }

  /** What this worker speaks: the lifecycle spec's list, else `extensions` (null: original-style). */
  #speaks(): string[] | null {
    const lc = this.spec.lifecycle;
    return lc !== undefined ? lc.extensions : (this.spec.extensions ?? null);
  }

  #fault<K extends WorkerFault["kind"]>(
    kind: K,
    atMs: number,
  ): Extract<WorkerFault, { kind: K }> | null {
    if (!this.#world.faultsOn(atMs)) return null;
    for (const f of this.spec.faults) {
      if (f.kind === kind) return f as Extract<WorkerFault, { kind: K }>;
    }
    return null;
  }

  /** A new worker process (start, or restart after a crash or exit). */
  #startProcess(): void {
    const core = this.#newCore();
    this.#core = core;
    this.#driver = makeDriver({
      state: core,
      step,
      run: (a: WorkerAction) => this.#act(this.#now ?? 0, a),
    });
  }

  /**
   * The process is gone: its core with it, and its driver stops (the actions
   * of the event being handled still run; later events are dropped).
   */
  #stopProcess(): void {
    this.#driver?.stop();
    this.#driver = null;
    this.#core = null;
  }

  #newCore(): WorkerState {
    const speaks = this.#speaks();
    return initialWorkerState({
      workerName: this.spec.name,
      maxConcurrent: this.spec.maxConcurrent,
      models: this.#backend.models,
      modelsDiscovered: true,
      drainTimeoutSecs: 30,
      // The host's own reconnect policy decides when it comes back.
      onServerShutdown: "reconnect",
      speaks,
      // The original worker has no frame limit of its own: it sends any size.
      responseFrameBytesMax: speaks === null
        ? Infinity
        : this.#world.frameCharsMax,
      endpointPrefixes: this.spec.endpointPrefixes ?? [],
    });
  }

  /** Sends a frame; frames of one connection arrive in order (WebSocket). */
  #send(now: number, text: string | Uint8Array): void {
    if (this.conn === null) return;
    const at = Math.max(
      now + this.#prng.int(this.spec.netDelayMs[0], this.spec.netDelayMs[1]),
      this.#lastDeliveryAtMs,
    );
    this.#lastDeliveryAtMs = at;
    this.#world.schedule(
      at,
      typeof text === "string"
        ? { kind: "frame", conn: this.conn, text }
        : { kind: "binaryFrame", conn: this.conn, bytes: text },
    );
  }

  // ---- the worker core and its actions --------------------------------------------

  /**
   * What the worker shell's readers do with a backend's stream (C60): our
   * worker holds back an unfinished SSE event (the real passage,
   * core/protocol/sse_events.ts), passes it on once whole or at a normal end,
   * and drops it on a break; an original-style worker passes reads as they
   * come. Returns the events the core sees.
   */
  /**
   * A stream's head as a backend would send it: NDJSON for about half the
   * requests (the worker core sends those), SSE for the rest (it sends
   * none), chosen from the id so the run's random draws stay as they were.
   * It names its sender, so the observer can tell whose head a client got.
   */
  #headRead(requestId: string): WorkerInput {
    const ndjson = requestId.charCodeAt(requestId.length - 1) % 2 === 1;
    return {
      kind: "headRead",
      requestId,
      status: 200,
      headers: {
        "content-type": ndjson ? "application/x-ndjson" : "text/event-stream",
        "x-sim-head": `${this.conn}|${requestId}`,
      },
    };
  }

  #readerEvents(e: WorkerInput): WorkerInput[] {
    if (this.#speaks() === null) return [e];
    switch (e.kind) {
      case "chunkRead": {
        if (typeof e.chunk !== "string") return [e];
        let p = this.#events.get(e.requestId);
        // The first read of a stream: the shell passes its head first
        // (stream-head-v1, C108; the worker core decides whether it leaves).
        const first: WorkerInput[] = p === undefined
          ? [this.#headRead(e.requestId)]
          : [];
        if (p === undefined) {
          p = newSseEventPassage<string>("");
          this.#events.set(e.requestId, p);
        }
        const out = p.pass(e.chunk);
        return out === "" ? first : [...first, { ...e, chunk: out }];
      }
      case "backendFinished": {
        const rest = this.#events.get(e.requestId)?.end() ?? "";
        this.#events.delete(e.requestId);
        return rest === "" || e.completion.status_code >= 400
          ? [e]
          : [{ kind: "chunkRead", requestId: e.requestId, chunk: rest }, e];
      }
      case "backendUnavailable":
      case "backendStreamBroken":
        this.#events.delete(e.requestId);
        return [e];
      default:
        return [e];
    }
  }

  /** Steps the real worker core and carries out its actions, in order. */
  #step(now: number, e: WorkerInput): void {
    if (this.#core === null) return;
    for (const x of this.#readerEvents(e)) this.#stepCore(now, x);
  }

  #stepCore(now: number, e: WorkerInput): void {
    const core = this.#core;
    if (core === null) return;
    // The worker shell reads a stream as bytes once chunk-bytes-v1 is acked.
    if (
      e.kind === "chunkRead" && typeof e.chunk === "string" &&
      core.extensions.includes(EXTENSION_CHUNK_BYTES)
    ) e = { ...e, chunk: UTF8.encode(e.chunk) };
    // Actions run at the time of the event that started the batch; an event
    // raised meanwhile is queued by the driver and stepped after it.
    const outer = this.#now === null;
    if (outer) this.#now = now;
    try {
      this.#driver?.submit({ ...e, atMs: now });
    } finally {
      if (outer) this.#now = null;
    }
  }

  #act(now: number, a: WorkerAction): void {
    switch (a.kind) {
      case "send":
        return this.#deliver(now, a.message);
      case "sendChunkBytes":
        this.#send(now, encodeBinaryChunkFrame(a.requestId, a.chunk));
        return this.#chunkSent(now);
      case "forward":
        if (this.conn !== null) {
          this.#backend.forward(now, this.conn, a.request);
        }
        return;
      case "abortBackend":
        return this.#backend.abort(
          a.requestId,
          this.spec.onCancel === "ignore",
        );
      case "listModels":
        this.#driver?.submit({
          atMs: now,
          kind: "modelsListed",
          models: this.#backend.models,
          reply: a.reply,
        });
        return;
      case "probeCapabilities": {
        const c = this.#backend.capabilities();
        if (c !== null) {
          this.#driver?.submit({
            atMs: now,
            kind: "capabilitiesRead",
            capabilities: c,
          });
        }
        return;
      }
      case "runLifecycle":
        if (this.conn !== null) {
          this.#backend.runLifecycle(now, this.conn, a.request);
        }
        return;
      case "armTimer":
        // Reconnects follow the host's plan (reconnectAfterMs, heal); the 90 s
        // idle watchdog outlasts every run (the server pings each second); the
        // periodic capabilities probe and models refresh are not run (the
        // virtual backend's capabilities are read once, on register_ack).
        if (a.timer !== "drain" || this.conn === null) return;
        this.#timers.set(a.timer, ++this.#timerGen);
        this.#world.schedule(now + a.ms, {
          kind: "timer",
          host: this.index,
          conn: this.conn,
          timer: a.timer,
          gen: this.#timerGen,
        });
        return;
      case "closeSocket":
      case "dropSocket":
        return this.#closeFromWorker(now);
      case "exit":
        return this.#exit(now);
      case "connect":
        return this.#openSocket(now);
      case "log":
        return;
    }
  }

  /**
   * The transport and the host's habits: pongs that stop or lie, a crash after
   * the k-th chunk, duplicated completions, an original-style worker's silence
   * after a cancel.
   */
  #deliver(now: number, m: WorkerMessage): void {
    switch (m.type) {
      case "pong": {
        const stop = this.#fault("stopPongs", now);
        if (stop !== null && now >= stop.fromMs && now < stop.untilMs) return;
        const lie = this.#fault("lieLoad", now)?.extra ?? 0;
        if (lie > 0) m = { ...m, current_load: (m.current_load ?? 0) + lie };
        break;
      }
      case "response_complete":
        if (m.status_code === 499 && this.#silenced.delete(m.request_id)) {
          return; // the original worker sends nothing after a cancel
        }
        break;
      default:
        break;
    }
    const text = encodeFrame(m);
    this.#send(now, text);
    if (m.type === "response_chunk") return this.#chunkSent(now);
    if (m.type === "response_complete") {
      const dup = this.#fault("duplicateComplete", now);
      if (dup !== null && this.#prng.chance(dup.num, dup.den)) {
        this.#send(now, text);
      }
    }
  }

  /** A chunk frame left (text or binary): the crash-at-chunk-k fault counts it. */
  #chunkSent(now: number): void {
    this.#chunksOnConn++;
    const crash = this.#fault("crashAtChunk", now);
    if (crash !== null && this.#chunksOnConn === crash.chunk) {
      this.crash(now, "worker process died");
    }
  }

  // ---- sockets and the process -----------------------------------------------------

  /** Host plan: start (or restart) the process if needed and connect. */
  connect(now: number): void {
    if (this.conn !== null) return;
    if (this.#core === null) this.#startProcess();
    this.#openSocket(now);
  }

  #openSocket(now: number): void {
    if (this.conn !== null || this.#core === null) return;
    this.conn = `${this.spec.name}.${++this.#connCount}`;
    this.#chunksOnConn = 0;
    this.#lastDeliveryAtMs = now;
    this.#world.schedule(now, {
      kind: "core",
      event: {
        kind: "workerConnectAttempted",
        atMs: now,
        workerId: this.conn,
        provider: "local",
        clientIp: `10.0.0.${this.index}`,
        secretValid: true,
      },
    });
  }

  /** The server hears the socket close after the frames already in flight. */
  #serverHearsClose(now: number, conn: string, reason: string): void {
    const at = Math.max(
      now + this.#prng.int(this.spec.netDelayMs[0], this.spec.netDelayMs[1]),
      this.#lastDeliveryAtMs,
    );
    this.#world.schedule(at, {
      kind: "core",
      event: { kind: "workerDisconnected", atMs: at, workerId: conn, reason },
    });
  }

  /** The connection is gone; the host reconnects per its plan. */
  #lost(now: number): void {
    this.conn = null;
    this.#backend.dropAll();
    this.#events.clear();
    this.#silenced.clear();
    this.#timers.clear();
    // In the heal phase every host comes back (TigerBeetle's liveness mode).
    const delay = this.#world.faultsOn(now)
      ? this.spec.reconnectAfterMs
      : (this.spec.reconnectAfterMs ?? 500);
    if (delay !== null) {
      this.#world.schedule(now + delay, {
        kind: "host",
        host: this.index,
        what: "connect",
        fault: -1,
      });
    }
  }

  /** The worker core closed its socket (drained, drain timeout, dead proxy). */
  #closeFromWorker(now: number): void {
    const conn = this.conn;
    if (conn === null) return;
    this.#serverHearsClose(now, conn, "worker closed the connection");
    this.#lost(now);
    this.#driver?.submit({
      atMs: now,
      kind: "socketClosed",
      code: 1000,
      reason: "closed by worker",
      wasOpen: true,
      random01: 0,
    });
  }

  #exit(now: number): void {
    this.#stopProcess();
    if (this.conn !== null) {
      this.#serverHearsClose(now, this.conn, "worker exited");
      this.#lost(now);
    }
  }

  /** The worker process dies: the server hears of it after in-flight frames. */
  crash(now: number, reason: string): void {
    const conn = this.conn;
    if (conn === null) return;
    this.#serverHearsClose(now, conn, reason);
    this.#stopProcess();
    this.#lost(now);
  }

  /** The network cuts the socket: both ends notice. */
  #cut(now: number): void {
    const conn = this.conn;
    if (conn === null) return;
    this.#serverHearsClose(now, conn, "connection reset");
    this.#lost(now);
    this.#step(now, {
      kind: "socketClosed",
      code: 1006,
      reason: "connection reset",
      wasOpen: true,
      random01: this.#prng.int(0, 999) / 1000,
    });
  }

  /** Heal phase: a host that is down comes back. */
  heal(now: number): void {
    if (this.conn === null) this.connect(now);
  }

  /** Acts on fault number `i` of its plan at its time. */
  onFault(now: number, i: number): void {
    const f = this.spec.faults[i];
    if (f === undefined || !this.#world.faultsOn(now)) return;
    const conn = this.conn;
    switch (f.kind) {
      case "disconnectAt":
        return this.#cut(now);
      case "drainAt":
        if (conn === null) return;
        this.#world.schedule(now, {
          kind: "core",
          event: {
            kind: "workerDrainRequested",
            atMs: now,
            workerId: conn,
            reason: "operator drain",
          },
        });
        return;
      case "signalAt":
        return this.#step(now, { kind: "shutdownSignalled" });
      case "modelsUpdate":
        this.#backend.models = f.models;
        return this.#step(now, {
          kind: "modelsListed",
          models: f.models,
          reply: false,
        });
      case "garbageAt":
        this.#send(now, garbageFrame(f.variant, this.#world.frameCharsMax));
        return;
      case "foreignFramesAt":
        this.#sendForeign(now, f.count);
        return;
      default:
        return;
    }
  }

  #sendForeign(now: number, count: number): void {
    if (this.conn === null || this.#core?.registered !== true) return;
    const ids = this.#world.foreignRequestIds(this.conn);
    for (let k = 0; k < count; k++) {
      const id = ids.length > 0 && this.#prng.chance(3, 4)
        ? this.#prng.pick(ids)
        : `ghost-${k}`;
      if (this.#core.inFlight.has(id)) continue;
      const which = this.#prng.int(0, 2);
      const frame: WorkerMessage = which === 0
        ? {
          type: "response_chunk",
          request_id: id,
          chunk: chunkText(this.conn, id, 0),
        }
        : which === 1
        ? {
          type: "response_complete",
          request_id: id,
          status_code: 200,
          body: `${this.conn}|${id}|B`,
        }
        : {
          type: "error",
          request_id: id,
          code: "foreign",
          message: "not mine",
        };
      this.#send(now, encodeFrame(frame));
    }
  }

  /** The run hands every effect addressed to this worker's connection here. */
  onEffect(now: number, f: Effect): void {
    if (this.conn === null) return;
    switch (f.kind) {
      case "acceptWorker":
        return this.#step(now, { kind: "socketOpened" });
      case "rejectWorker":
      case "closeWorker": {
        const conn = this.conn;
        // The shell hears the socket close too; the core must ignore it by then.
        this.#world.schedule(now + 1, {
          kind: "core",
          event: {
            kind: "workerDisconnected",
            atMs: now + 1,
            workerId: conn,
            reason: "closed by server",
          },
        });
        this.#lost(now);
        return this.#step(now, {
          kind: "socketClosed",
          code: f.code,
          reason: f.reason,
          wasOpen: f.kind === "closeWorker",
          random01: this.#prng.int(0, 999) / 1000,
        });
      }
      case "sendToWorker": {
        const m = f.message;
        if (m.type === "cancel" && this.spec.onCancel !== "ack") {
          this.#silenced.add(m.request_id);
        }
        this.#step(now, { kind: "frameReceived", text: encodeFrame(m) });
        if (m.type === "register_ack") this.#hostileCapabilities(now);
        return;
      }
      default:
        return;
    }
  }

  /** A worker that sends capabilities without negotiating them (the core must ignore them). */
  #hostileCapabilities(now: number): void {
    if (this.#core?.extensions.includes(EXTENSION_CAPABILITIES) !== false) {
      return;
    }
    const c = this.#backend.capabilities();
    if (c !== null) {
      this.#send(now, encodeFrame({ type: "capabilities", capabilities: c }));
    }
  }

  onJob(now: number, conn: string, requestId: string): void {
    if (conn !== this.conn) return;
    this.#backend.onJob(now, conn, requestId);
  }

  onLifecycle(now: number, conn: string, taskId: string): void {
    if (conn !== this.conn) return;
    this.#backend.onLifecycle(now, conn, taskId);
  }

  onTimer(now: number, conn: string, timer: string, gen: number): void {
    if (conn !== this.conn || this.#timers.get(timer) !== gen) return;
    this.#timers.delete(timer);
    if (timer === "drain") this.#step(now, { kind: "drainTimerFired" });
  }
}
