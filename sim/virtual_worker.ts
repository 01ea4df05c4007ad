// A virtual worker host: connects, registers, serves requests at a seeded speed
// and follows its failure plan (crash at chunk k, stop answering pings, drain,
// reconnect later, change models, garbage frames, frames for requests that are
// not its own). Its frames are encoded text that the run decodes with core's
// `eventFromFrame`, so the decoder is exercised too (conventions §6, C33).
import {
  type Effect,
  encodeFrame,
  EXTENSION_LIFECYCLE,
  type LifecycleOperation,
  type WorkerId,
} from "../core/mod.ts";
import type { Prng } from "./prng.ts";
import type { Range, WorkerFault, WorkerSpec } from "./scenario.ts";
import type { World } from "./world.ts";

type Job = {
  requestId: string;
  streaming: boolean;
  total: number;
  sent: number;
  /** Chunks after which a scoped error replaces the rest (errorReplies), or -1. */
  errorAfter: number;
  cancelled: boolean;
};

/** A lifecycle task as the worker runs it (issue 9); its fate is drawn on arrival. */
type Task = {
  id: string;
  operation: LifecycleOperation;
  model: string | null;
  fate: "complete" | "fail" | "hang" | "crash";
  total: number;
  sent: number;
};

/** A chunk names its connection, request and position, so the client can check it. */
export function chunkText(conn: string, requestId: string, i: number): string {
  return `${conn}|${requestId}|${i};`;
}

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

function draw(prng: Prng, r: Range): number {
  return prng.int(r[0], r[1]);
}

export class VirtualWorker {
  readonly spec: WorkerSpec;
  readonly index: number;
  readonly #prng: Prng;
  readonly #world: World;
  conn: WorkerId | null = null;
  #connCount = 0;
  #registered = false;
  #jobs = new Map<string, Job>();
  #chunksOnConn = 0;
  #lastDeliveryAtMs = 0;
  #models: string[];
  #tasks = new Map<string, Task>();

  constructor(spec: WorkerSpec, index: number, prng: Prng, world: World) {
    this.spec = spec;
    this.index = index;
    this.#prng = prng;
    this.#world = world;
    this.#models = spec.models;
  }

  get connected(): boolean {
    return this.conn !== null;
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

  /** Sends a frame; frames of one connection arrive in order (WebSocket). */
  #send(now: number, text: string): void {
    if (this.conn === null) return;
    const at = Math.max(
      now + draw(this.#prng, this.spec.netDelayMs),
      this.#lastDeliveryAtMs,
    );
    this.#lastDeliveryAtMs = at;
    this.#world.schedule(at, { kind: "frame", conn: this.conn, text });
  }

  connect(now: number): void {
    if (this.conn !== null) return;
    this.conn = `${this.spec.name}.${++this.#connCount}`;
    this.#registered = false;
    this.#jobs.clear();
    this.#tasks.clear();
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

  /** The socket is gone (server close, crash, cut). */
  #down(now: number, reconnect: boolean): void {
    this.conn = null;
    this.#registered = false;
    this.#jobs.clear();
    this.#tasks.clear();
    if (!reconnect) return;
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

  /** The worker side drops the socket: the server hears of it after in-flight frames. */
  crash(now: number, reason: string): void {
    const conn = this.conn;
    if (conn === null) return;
    const at = Math.max(
      now + draw(this.#prng, this.spec.netDelayMs),
      this.#lastDeliveryAtMs,
    );
    this.#world.schedule(at, {
      kind: "core",
      event: { kind: "workerDisconnected", atMs: at, workerId: conn, reason },
    });
    this.#down(now, true);
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
        return this.crash(now, "connection reset");
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
      case "modelsUpdate":
        this.#models = f.models;
        if (conn === null || !this.#registered) return;
        this.#send(
          now,
          encodeFrame({
            type: "models_update",
            models: f.models,
            current_load: this.#jobs.size,
          }),
        );
        return;
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
    if (this.conn === null || !this.#registered) return;
    const ids = this.#world.foreignRequestIds(this.conn);
    for (let k = 0; k < count; k++) {
      const id = ids.length > 0 && this.#prng.chance(3, 4)
        ? this.#prng.pick(ids)
        : `ghost-${k}`;
      if (this.#jobs.has(id)) continue;
      const which = this.#prng.int(0, 2);
      if (which === 0) {
        this.#send(
          now,
          encodeFrame({
            type: "response_chunk",
            request_id: id,
            chunk: chunkText(this.conn, id, 0),
          }),
        );
      } else if (which === 1) {
        this.#send(
          now,
          encodeFrame({
            type: "response_complete",
            request_id: id,
            status_code: 200,
            body: `${this.conn}|${id}|B`,
          }),
        );
      } else {
        this.#send(
          now,
          encodeFrame({
            type: "error",
            request_id: id,
            code: "foreign",
            message: "not mine",
          }),
        );
      }
    }
  }

  /** The run hands every effect addressed to this worker's connection here. */
  onEffect(now: number, f: Effect): void {
    if (this.conn === null) return;
    switch (f.kind) {
      case "acceptWorker": {
        const ext = this.spec.lifecycle?.extensions ?? null;
        this.#send(
          now,
          encodeFrame({
            type: "register",
            worker_name: this.spec.name,
            models: this.#models,
            max_concurrent: this.spec.maxConcurrent,
            protocol_version: "2026-04-bridge-v1",
            current_load: 0,
            // Original-style workers send no `extensions` field at all.
            ...(ext === null ? {} : { extensions: ext }),
          }),
        );
        return;
      }
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
        return this.#down(now, true);
      }
      case "sendToWorker":
        return this.#onMessage(now, f.message);
      default:
        return;
    }
  }

  #onMessage(
    now: number,
    m: Extract<Effect, { kind: "sendToWorker" }>["message"],
  ): void {
    switch (m.type) {
      case "register_ack":
        this.#registered = true;
        this.#sendCapabilities(now);
        return;
      case "lifecycle_request":
        return this.#onLifecycleRequest(now, m);
      case "request": {
        const errorReplies = this.#fault("errorReplies", now);
        const total = draw(this.#prng, this.spec.chunks);
        const job: Job = {
          requestId: m.request_id,
          streaming: m.is_streaming,
          // Non-streaming answers sometimes arrive in pieces too (tolerated by core).
          total: m.is_streaming
            ? total
            : (this.#prng.chance(1, 4) ? this.#prng.int(1, 3) : 0),
          sent: 0,
          errorAfter: errorReplies !== null &&
              this.#prng.chance(errorReplies.num, errorReplies.den)
            ? this.#prng.int(0, total)
            : -1,
          cancelled: false,
        };
        this.#jobs.set(job.requestId, job);
        this.#scheduleJob(now + draw(this.#prng, this.spec.firstChunkMs), job);
        return;
      }
      case "cancel": {
        const job = this.#jobs.get(m.request_id);
        if (job === undefined) return;
        if (this.spec.onCancel === "ignore") {
          job.cancelled = true; // keeps streaming: its late chunks must be dropped (C20)
          return;
        }
        this.#jobs.delete(m.request_id);
        if (this.spec.onCancel === "ack") {
          this.#send(
            now,
            encodeFrame({
              type: "error",
              request_id: m.request_id,
              code: "cancelled",
              message: "cancelled",
            }),
          );
        }
        return;
      }
      case "ping": {
        const stop = this.#fault("stopPongs", now);
        if (stop !== null && now >= stop.fromMs && now < stop.untilMs) return;
        const lie = this.#fault("lieLoad", now)?.extra ?? 0;
        this.#send(
          now,
          encodeFrame({
            type: "pong",
            current_load: this.#jobs.size + lie,
            timestamp_unix_ms: now,
          }),
        );
        return;
      }
      case "models_refresh":
        this.#send(
          now,
          encodeFrame({
            type: "models_update",
            models: this.#models,
            current_load: this.#jobs.size,
          }),
        );
        return;
      case "graceful_shutdown":
        return; // finishes what it has; the server closes it when idle (C28)
    }
  }

  /** Capabilities frames (capabilities-v1); a worker may send them without negotiating (ignored by the core). */
  #sendCapabilities(now: number): void {
    const lc = this.spec.lifecycle;
    if (lc === undefined || !lc.sendsCapabilities || !this.#registered) return;
    const loading: { id: string; progress: number }[] = [];
    for (const t of this.#tasks.values()) {
      if (t.operation === "model-load" && t.model !== null) {
        loading.push({ id: t.model, progress: t.sent / (t.total + 1) });
      }
    }
    this.#send(
      now,
      encodeFrame({
        type: "capabilities",
        capabilities: {
          runnerType: "sim",
          runnerId: this.spec.name,
          models: {
            loaded: this.#models.filter((m) => m !== "*").map((id) => ({ id })),
            loading,
            available: lc.available,
          },
          health: "ok",
        },
      }),
    );
  }

  #onLifecycleRequest(
    now: number,
    m: Extract<
      Extract<Effect, { kind: "sendToWorker" }>["message"],
      { type: "lifecycle_request" }
    >,
  ): void {
    const lc = this.spec.lifecycle;
    // A worker that did not list lifecycle-v1 would not understand the frame.
    if (lc?.extensions?.includes(EXTENSION_LIFECYCLE) !== true) return;
    if (!this.#registered || this.#tasks.has(m.task_id)) return;
    const roll = this.#prng.int(0, lc.den - 1);
    const fate: Task["fate"] = roll < lc.crashNum
      ? "crash"
      : roll < lc.crashNum + lc.hangNum
      ? "hang"
      : roll < lc.crashNum + lc.hangNum + lc.failNum
      ? "fail"
      : "complete";
    const model = m.params.modelId;
    const task: Task = {
      id: m.task_id,
      operation: m.operation,
      model: typeof model === "string" ? model : null,
      fate,
      total: draw(this.#prng, lc.steps),
      sent: 0,
    };
    this.#tasks.set(task.id, task);
    this.#scheduleTask(now, task);
    if (task.operation === "model-load") this.#sendCapabilities(now);
  }

  #scheduleTask(now: number, task: Task): void {
    if (this.conn === null) return;
    this.#world.schedule(now + draw(this.#prng, this.spec.lifecycle!.stepMs), {
      kind: "lifecycle",
      host: this.index,
      conn: this.conn,
      taskId: task.id,
    });
  }

  #progress(
    now: number,
    task: Task,
    status: "running" | "completed" | "failed",
    extra: {
      progress?: number;
      error?: string;
      result?: Record<string, unknown>;
    },
  ): void {
    this.#send(
      now,
      encodeFrame({
        type: "lifecycle_progress",
        task_id: task.id,
        status,
        ...extra,
      }),
    );
  }

  /** Next step of a lifecycle task: a progress report, or its end (or a crash, or silence). */
  onLifecycle(now: number, conn: string, taskId: string): void {
    if (conn !== this.conn) return;
    const task = this.#tasks.get(taskId);
    if (task === undefined) return;
    if (task.sent < task.total) {
      task.sent++;
      this.#progress(now, task, "running", {
        progress: task.sent / (task.total + 1),
      });
      this.#scheduleTask(now, task);
      return;
    }
    this.#tasks.delete(taskId);
    // In the heal phase a doomed task still fails or hangs, but no longer kills its worker.
    const fate = task.fate === "crash" && !this.#world.faultsOn(now)
      ? "complete"
      : task.fate;
    switch (fate) {
      case "hang":
        return; // never answers: the core's task timeout must end it
      case "crash":
        return this.crash(now, "worker process died during a lifecycle task");
      case "fail": {
        const unsupported = this.#prng.chance(1, 3);
        this.#progress(now, task, "failed", {
          error: unsupported ? "backend lacks the operation" : "backend error",
          ...(unsupported ? { result: { status: 501 } } : {}),
        });
        return;
      }
      case "complete": {
        this.#progress(now, task, "completed", { result: { ok: true } });
        const before = this.#models;
        if (task.model !== null && task.operation === "model-load") {
          if (!before.includes(task.model)) {
            this.#models = [...before, task.model];
          }
        } else if (task.model !== null && task.operation === "model-unload") {
          this.#models = before.filter((x) => x !== task.model);
        }
        if (this.#models !== before) {
          this.#send(
            now,
            encodeFrame({
              type: "models_update",
              models: this.#models,
              current_load: this.#jobs.size,
            }),
          );
        }
        if (task.operation !== "cache-flush") this.#sendCapabilities(now);
        return;
      }
    }
  }

  #scheduleJob(at: number, job: Job): void {
    if (this.conn === null) return;
    this.#world.schedule(at, {
      kind: "job",
      host: this.index,
      conn: this.conn,
      requestId: job.requestId,
    });
  }

  /** Next step of a job: a chunk, an error, or the completion. */
  onJob(now: number, conn: string, requestId: string): void {
    if (conn !== this.conn) return;
    const job = this.#jobs.get(requestId);
    if (job === undefined) return;
    if (job.errorAfter >= 0 && job.sent >= job.errorAfter) {
      this.#jobs.delete(requestId);
      this.#send(
        now,
        encodeFrame({
          type: "error",
          request_id: requestId,
          code: "backend_error",
          message: "backend failed",
        }),
      );
      return;
    }
    if (job.sent < job.total) {
      this.#send(
        now,
        encodeFrame({
          type: "response_chunk",
          request_id: requestId,
          chunk: chunkText(conn, requestId, job.sent),
        }),
      );
      job.sent++;
      this.#chunksOnConn++;
      const crash = this.#fault("crashAtChunk", now);
      if (crash !== null && this.#chunksOnConn === crash.chunk) {
        return this.crash(now, "worker process died");
      }
      this.#scheduleJob(now + draw(this.#prng, this.spec.chunkGapMs), job);
      return;
    }
    this.#jobs.delete(requestId);
    const body = job.streaming
      ? (this.#prng.chance(1, 2) ? chunkText(conn, requestId, job.sent) : "")
      : `${conn}|${requestId}|B`;
    const frame = encodeFrame({
      type: "response_complete",
      request_id: requestId,
      status_code: this.#prng.chance(1, 10) ? 500 : 200,
      headers: { "content-type": "application/json" },
      body,
      token_counts: {
        prompt_tokens: 3,
        completion_tokens: job.sent,
        total_tokens: 3 + job.sent,
      },
    });
    this.#send(now, frame);
    const dup = this.#fault("duplicateComplete", now);
    if (dup !== null && this.#prng.chance(dup.num, dup.den)) {
      this.#send(now, frame);
    }
  }
}
