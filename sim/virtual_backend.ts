// A simulated inference backend (llama-server or the like) behind one virtual
// worker, with a seeded fault plan (issue 14): it refuses connections, dies
// before the first byte or mid-stream, answers with a body larger than a frame,
// answers very slowly, or answers 4xx/5xx. It reports what a real backend client
// would see as worker-core events (`chunkRead`, `backendFinished`,
// `backendUnavailable`, `lifecycleUpdate`), which the virtual worker steps
// through the real worker core.
import type {
  LifecycleRequestMessage,
  RequestMessage,
  RunnerCapabilities,
} from "../core/mod.ts";
import type { WorkerInput } from "../core/worker/mod.ts";
import type { Prng } from "./prng.ts";
import type { Range, WorkerSpec } from "./scenario.ts";
import type { World } from "./world.ts";

type Fate =
  | "ok"
  | "refuse"
  | "reset"
  | "dieMidStream"
  | "oversized"
  | "errorStatus";

type Job = {
  requestId: string;
  /** The worker connection it arrived on: its chunks name it (the observer checks). */
  conn: string;
  streaming: boolean;
  total: number;
  sent: number;
  fate: Fate;
  /** dieMidStream: chunks sent before the backend dies (at least one). */
  dieAfter: number;
  /** The worker aborted the call but this (original-style) worker streams on. */
  orphaned: boolean;
};

/** A lifecycle task as the backend runs it (issue 9); its fate is drawn on arrival. */
type Task = {
  id: string;
  conn: string;
  operation: LifecycleRequestMessage["operation"];
  model: string | null;
  fate: "complete" | "fail" | "hang" | "crash";
  total: number;
  sent: number;
};

/** A chunk names its connection, request and position, so the client can check it. */
export function chunkText(conn: string, requestId: string, i: number): string {
  return `${conn}|${requestId}|${i};`;
}

/** A stream's chunk: one whole server-sent event carrying a piece (C60). */
export function sseEvent(text: string): string {
  return `data: ${text}\n\n`;
}

/** Statuses a failing backend answers with. */
const ERROR_STATUSES = [400, 404, 413, 429, 500, 503];

function draw(prng: Prng, r: Range): number {
  return prng.int(r[0], r[1]);
}

/** What the backend needs from its host: report to the worker core, crash the host. */
export type BackendHost = {
  report(now: number, e: WorkerInput): void;
  /** Frames an original-style worker sends itself for an aborted call it kept running. */
  sendOrphanFrame(now: number, conn: string, text: string): void;
  crash(now: number, reason: string): void;
  faultsOn(now: number): boolean;
  /** Legacy plan: a share of answers fail (errorReplies). */
  errorShare(now: number): { num: number; den: number } | null;
};

export class VirtualBackend {
  readonly #spec: WorkerSpec;
  readonly #index: number;
  readonly #prng: Prng;
  readonly #world: World;
  readonly #host: BackendHost;
  #jobs = new Map<string, Job>();
  #tasks = new Map<string, Task>();
  /** Models the backend serves (changed by lifecycle tasks and the modelsUpdate fault). */
  models: string[];

  constructor(
    spec: WorkerSpec,
    index: number,
    prng: Prng,
    world: World,
    host: BackendHost,
  ) {
    this.#spec = spec;
    this.#index = index;
    this.#prng = prng;
    this.#world = world;
    this.#host = host;
    this.models = spec.models;
  }

  /** The worker process died or its connection closed: every call it held is gone. */
  dropAll(): void {
    this.#jobs.clear();
    this.#tasks.clear();
  }

  #drawFate(now: number, streaming: boolean, total: number): [Fate, number] {
    const legacy = this.#host.errorShare(now);
    if (legacy !== null && this.#prng.chance(legacy.num, legacy.den)) {
      const after = this.#prng.int(0, total);
      return after === 0 || !streaming ? ["reset", 0] : ["dieMidStream", after];
    }
    const plan = this.#spec.backend;
    if (plan === undefined || !this.#host.faultsOn(now)) return ["ok", 0];
    let roll = this.#prng.int(0, plan.den - 1);
    const shares: [Fate, number][] = [
      ["refuse", plan.refuseNum],
      ["reset", plan.resetNum],
      ["dieMidStream", plan.dieMidStreamNum],
      ["oversized", plan.oversizedNum],
      ["errorStatus", plan.errorStatusNum],
    ];
    for (const [fate, n] of shares) {
      if (roll < n) {
        if (fate === "dieMidStream") {
          return streaming && total > 0
            ? [fate, this.#prng.int(1, total)]
            : ["errorStatus", 0];
        }
        if (fate === "oversized" && streaming) return ["ok", 0];
        return [fate, 0];
      }
      roll -= n;
    }
    return ["ok", 0];
  }

  /** The worker core's `forward`: the call starts. */
  forward(now: number, conn: string, r: RequestMessage): void {
    const total = r.is_streaming ? draw(this.#prng, this.#spec.chunks) : 0;
    const [fate, dieAfter] = this.#drawFate(now, r.is_streaming, total);
    const plan = this.#spec.backend;
    const slow = plan !== undefined && this.#host.faultsOn(now) &&
      this.#prng.chance(plan.slowNum, plan.den);
    const job: Job = {
      requestId: r.request_id,
      conn,
      streaming: r.is_streaming,
      // A 4xx/5xx comes before any chunk, as a backend refuses a request.
      total: fate === "errorStatus" ? 0 : total,
      sent: 0,
      fate,
      dieAfter,
      orphaned: false,
    };
    this.#jobs.set(job.requestId, job);
    const delay = fate === "refuse"
      ? draw(this.#prng, this.#spec.netDelayMs)
      : slow
      ? draw(this.#prng, plan!.slowMs)
      : draw(this.#prng, this.#spec.firstChunkMs);
    this.#schedule(now + delay, job);
  }

  /**
   * The worker core's `abortBackend`. An original-style worker that ignores
   * cancels (`onCancel: "ignore"`) keeps the call running and streams on.
   */
  abort(requestId: string, keepStreaming: boolean): void {
    const job = this.#jobs.get(requestId);
    if (job === undefined) return;
    if (keepStreaming) job.orphaned = true;
    else this.#jobs.delete(requestId);
  }

  #schedule(at: number, job: Job): void {
    this.#world.schedule(at, {
      kind: "job",
      host: this.#index,
      conn: job.conn,
      requestId: job.requestId,
    });
  }

  /** Next step of a call: a chunk, a failure, or the answer. */
  onJob(now: number, conn: string, requestId: string): void {
    const job = this.#jobs.get(requestId);
    if (job === undefined || job.conn !== conn) return;
    if (job.orphaned) return this.#orphanStep(now, job);
    if ((job.fate === "refuse" || job.fate === "reset") && job.sent === 0) {
      this.#jobs.delete(requestId);
      return this.#host.report(now, {
        kind: "backendUnavailable",
        requestId,
        message: job.fate === "refuse"
          ? "connect ECONNREFUSED"
          : "socket hang up before the first byte",
      });
    }
    if (job.fate === "dieMidStream" && job.sent === job.dieAfter) {
      this.#jobs.delete(requestId);
      // It dies inside its next event: half of it was sent (C60).
      this.#host.report(now, {
        kind: "chunkRead",
        requestId,
        chunk: `data: ${chunkText(conn, requestId, job.sent)}`,
      });
      // What the worker's backend client reports for a broken answer.
      return this.#host.report(now, {
        kind: "backendFinished",
        requestId,
        completion: {
          status_code: 502,
          headers: { "content-type": "application/json" },
          body:
            '{"error":{"message":"backend response failed: the backend closed the connection mid-answer","type":"backend_error","code":"backend_error"}}',
          token_counts: null,
        },
      });
    }
    if (job.sent < job.total) {
      const chunk = sseEvent(chunkText(conn, requestId, job.sent));
      job.sent++;
      this.#schedule(now + draw(this.#prng, this.#spec.chunkGapMs), job);
      return this.#host.report(now, { kind: "chunkRead", requestId, chunk });
    }
    this.#jobs.delete(requestId);
    this.#host.report(now, {
      kind: "backendFinished",
      requestId,
      completion: {
        status_code: this.#finalStatus(job),
        headers: { "content-type": "application/json" },
        body: this.#finalBody(job),
        token_counts: {
          prompt_tokens: 3,
          completion_tokens: job.sent,
          total_tokens: 3 + job.sent,
        },
      },
    });
  }

  #finalStatus(job: Job): number {
    if (job.fate === "errorStatus") return this.#prng.pick(ERROR_STATUSES);
    return this.#prng.chance(1, 10) ? 500 : 200;
  }

  #finalBody(job: Job): string {
    if (job.streaming) {
      return this.#prng.chance(1, 2)
        ? chunkText(job.conn, job.requestId, job.sent)
        : "";
    }
    if (job.fate !== "oversized") return `${job.conn}|${job.requestId}|B`;
    // Larger than one frame: pieces the client can still check, then the tail.
    const max = this.#world.frameCharsMax;
    const size = this.#prng.int(max + 1, 4 * max);
    const parts: string[] = [];
    let length = 0;
    for (let i = 0; length < size; i++) {
      const p = chunkText(job.conn, job.requestId, i);
      parts.push(p);
      length += p.length;
    }
    return parts.join("") + `${job.conn}|${job.requestId}|B`;
  }

  /** An original-style worker streams on after a cancel: frames the core must drop (C20). */
  #orphanStep(now: number, job: Job): void {
    if (job.sent < job.total) {
      this.#host.sendOrphanFrame(
        now,
        job.conn,
        JSON.stringify({
          type: "response_chunk",
          request_id: job.requestId,
          chunk: chunkText(job.conn, job.requestId, job.sent),
        }),
      );
      job.sent++;
      this.#schedule(now + draw(this.#prng, this.#spec.chunkGapMs), job);
      return;
    }
    this.#jobs.delete(job.requestId);
    this.#host.sendOrphanFrame(
      now,
      job.conn,
      JSON.stringify({
        type: "response_complete",
        request_id: job.requestId,
        status_code: 200,
        body: "",
      }),
    );
  }

  // ---- spec 004 endpoints (issue 9) -------------------------------------------

  /** GET /v1/capabilities, for a backend that has it. */
  capabilities(): RunnerCapabilities | null {
    const lc = this.#spec.lifecycle;
    if (lc === undefined || !lc.sendsCapabilities) return null;
    const loading: { id: string; progress: number }[] = [];
    for (const t of this.#tasks.values()) {
      if (t.operation === "model-load" && t.model !== null) {
        loading.push({ id: t.model, progress: t.sent / (t.total + 1) });
      }
    }
    return {
      runnerType: "sim",
      runnerId: this.#spec.name,
      models: {
        loaded: this.models.filter((m) => m !== "*").map((id) => ({ id })),
        loading,
        available: lc.available,
      },
      health: "ok",
    };
  }

  /** The worker core's `runLifecycle`. */
  runLifecycle(now: number, conn: string, m: LifecycleRequestMessage): void {
    const lc = this.#spec.lifecycle;
    if (lc === undefined || this.#tasks.has(m.task_id)) return;
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
      conn,
      operation: m.operation,
      model: typeof model === "string" ? model : null,
      fate,
      total: draw(this.#prng, lc.steps),
      sent: 0,
    };
    this.#tasks.set(task.id, task);
    this.#scheduleTask(now, task);
  }

  #scheduleTask(now: number, task: Task): void {
    this.#world.schedule(now + draw(this.#prng, this.#spec.lifecycle!.stepMs), {
      kind: "lifecycle",
      host: this.#index,
      conn: task.conn,
      taskId: task.id,
    });
  }

  /** Next step of a lifecycle task: progress, its end, a crash, or silence. */
  onLifecycle(now: number, conn: string, taskId: string): void {
    const task = this.#tasks.get(taskId);
    if (task === undefined || task.conn !== conn) return;
    const update = (
      status: "running" | "completed" | "failed",
      extra: {
        progress?: number;
        error?: string;
        result?: Record<string, unknown>;
      },
    ) =>
      this.#host.report(now, {
        kind: "lifecycleUpdate",
        taskId,
        status,
        progress: extra.progress ?? null,
        error: extra.error ?? null,
        result: extra.result ?? null,
      });
    if (task.sent < task.total) {
      task.sent++;
      this.#scheduleTask(now, task);
      return update("running", { progress: task.sent / (task.total + 1) });
    }
    this.#tasks.delete(taskId);
    // In the heal phase a doomed task still fails or hangs, but no longer kills its worker.
    const fate = task.fate === "crash" && !this.#host.faultsOn(now)
      ? "complete"
      : task.fate;
    switch (fate) {
      case "hang":
        return; // never answers: the core's task timeout must end it
      case "crash":
        return this.#host.crash(
          now,
          "worker process died during a lifecycle task",
        );
      case "fail": {
        const unsupported = this.#prng.chance(1, 3);
        return update("failed", {
          error: unsupported ? "backend lacks the operation" : "backend error",
          ...(unsupported ? { result: { status: 501 } } : {}),
        });
      }
      case "complete": {
        if (task.model !== null && task.operation === "model-load") {
          if (!this.models.includes(task.model)) {
            this.models = [...this.models, task.model];
          }
        } else if (task.model !== null && task.operation === "model-unload") {
          this.models = this.models.filter((x) => x !== task.model);
        }
        return update("completed", { result: { ok: true } });
      }
    }
  }
}
