// Trace lines and the trace hash (conventions §7): every processed event and
// every effect becomes one canonical text line (kind, ids, time, counts; no
// object dumps), folded into a 64-bit FNV-1a as the run goes. Two runs with the
// same seed print the same hash.
import {
  chunkAsText,
  type ChunkData,
  type Effect,
  type Event,
  piecesAsText,
} from "../core/mod.ts";

/** FNV-1a 64-bit over the UTF-16 code units (two bytes each), as two 32-bit halves. */
export class TraceHash {
  #hi = 0xcbf2_9ce4;
  #lo = 0x8422_2325;

  /** Folds raw bytes (for the reference vectors). */
  bytes(bs: readonly number[]): void {
    for (const b of bs) this.#byte(b & 0xff);
  }

  #byte(b: number): void {
    const lo = (this.#lo ^ b) >>> 0;
    const a = lo * 0x1b3; // exact: below 2^41
    const newLo = a >>> 0;
    const carry = (a - newLo) / 0x1_0000_0000;
    this.#hi = (Math.imul(this.#hi, 0x1b3) + Math.imul(lo, 0x100) + carry) >>>
      0;
    this.#lo = newLo;
  }

  line(text: string): void {
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      this.#byte(c & 0xff);
      this.#byte(c >>> 8);
    }
    this.#byte(0x0a);
  }

  hex(): string {
    return this.#hi.toString(16).padStart(8, "0") +
      this.#lo.toString(16).padStart(8, "0");
  }
}

/** FNV-1a 64 of one string, as 16 hex digits. */
export function fnv1a64(text: string): string {
  const h = new TraceHash();
  h.line(text);
  return h.hex();
}

function short(s: string, n = 40): string {
  return s.length <= n ? s : s.slice(0, n) + `…(${s.length})`;
}

/** A chunk: its text, marked `b:` when it came as bytes (chunk-bytes-v1). */
function shortChunk(c: ChunkData): string {
  return typeof c === "string" ? short(c) : `b:${short(chunkAsText(c))}`;
}

export function eventLine(e: Event): string {
  switch (e.kind) {
    case "workerConnectAttempted":
      return `${e.atMs} E connect ${e.workerId} ${e.provider} ${e.secretValid}`;
    case "registerReceived":
      return `${e.atMs} E register ${e.workerId} models=${
        e.models.join(",")
      } max=${e.maxConcurrent} load=${e.currentLoad}`;
    case "modelsUpdateReceived":
      return `${e.atMs} E modelsUpdate ${e.workerId} models=${
        e.models.join(",")
      } load=${e.currentLoad}`;
    case "pongReceived":
      return `${e.atMs} E pong ${e.workerId} load=${e.currentLoad}`;
    case "chunkReceived":
      return `${e.atMs} E chunk ${e.workerId} ${e.requestId} ${
        shortChunk(e.chunk)
      }`;
    case "completeReceived":
      return `${e.atMs} E complete ${e.workerId} ${e.requestId} ${e.statusCode} ${
        short(e.body)
      }`;
    case "headReceived":
      return `${e.atMs} E head ${e.workerId} ${e.requestId} ${e.statusCode} ${
        e.headers["content-type"] ?? "-"
      }`;
    case "workerErrorReceived":
      return `${e.atMs} E workerError ${e.workerId} ${e.requestId} ${e.code}`;
    case "workerFrameInvalid":
      return `${e.atMs} E frameInvalid ${e.workerId} ${e.error.kind}`;
    case "workerDisconnected":
      return `${e.atMs} E disconnected ${e.workerId} ${e.reason}`;
    case "requestReceived":
      return `${e.atMs} E request ${e.requestId} ${e.model} stream=${e.isStreaming}${
        e.tenant === undefined ? "" : ` tenant=${e.tenant}`
      }${e.priority === undefined ? "" : ` prio=${e.priority}`}${
        e.cacheKey == null ? "" : ` key=${e.cacheKey}`
      }`;
    case "clientDisconnected":
      return `${e.atMs} E clientGone ${e.requestId}`;
    case "clientStalled":
      return `${e.atMs} E clientStalled ${e.requestId}`;
    case "responseSent":
      return `${e.atMs} E responseSent ${e.requestId}`;
    case "responseProgress":
      return `${e.atMs} E responseProgress ${e.requestId} ${e.written}`;
    case "tick":
      return `${e.atMs} E tick`;
    case "workerDrainRequested":
      return `${e.atMs} E drain ${e.workerId}`;
    case "modelsRefreshRequested":
      return `${e.atMs} E modelsRefresh ${e.workerId}`;
    case "shutdownRequested":
      return `${e.atMs} E shutdown`;
    case "capabilitiesReceived":
      return `${e.atMs} E capabilities ${e.workerId}`;
    case "lifecycleProgressReceived":
      return `${e.atMs} E lifecycleProgress ${e.workerId} ${e.taskId} ${e.status}`;
    case "lifecycleRequested":
      return `${e.atMs} E lifecycle ${e.taskId} ${e.operation} ${e.modelId}`;
    case "residencyReceived":
      return `${e.atMs} E residency ${e.workerId} loaded=${
        e.loaded.join(",")
      } loading=${e.loading.join(",")} room=${e.room}`;
  }
}

export function effectLine(f: Effect): string {
  switch (f.kind) {
    case "acceptWorker":
      return `  F accept ${f.workerId}`;
    case "rejectWorker":
      return `  F reject ${f.workerId} ${f.code}`;
    case "sendToWorker": {
      const m = f.message;
      switch (m.type) {
        case "request":
          return `  F send ${f.workerId} request ${m.request_id} ${m.model}`;
        case "cancel":
          return `  F send ${f.workerId} cancel ${m.request_id} ${
            typeof m.reason === "string" ? m.reason : m.reason.other
          }`;
        case "register_ack":
          return `  F send ${f.workerId} register_ack ${m.models.join(",")}`;
        default:
          return `  F send ${f.workerId} ${m.type}`;
      }
    }
    case "closeWorker":
      return `  F close ${f.workerId} ${f.code} ${f.reason}`;
    case "respond":
      return `  F respond ${f.requestId} ${f.status} ${
        short(piecesAsText(f.bodyPieces ?? [], f.body))
      }`;
    case "respondError":
      return `  F respondError ${f.requestId} ${f.error.status} ${f.error.code}`;
    case "startStream":
      return `  F startStream ${f.requestId}`;
    case "writeChunk":
      return `  F writeChunk ${f.requestId} ${shortChunk(f.chunk)}`;
    case "endStream":
      return `  F endStream ${f.requestId} ${f.error?.code ?? "ok"}`;
    case "cutResponse":
      return `  F cutResponse ${f.requestId}`;
    case "log":
      return `  F log ${f.level} ${f.message}`;
    case "requestFinished":
      return `  F finished ${f.requestId} ${f.outcome} ${f.status} requeues=${f.requeues} tenant=${f.tenant}`;
    case "shutdownComplete":
      return `  F shutdownComplete`;
    case "lifecycleTaskChanged":
      return `  F lifecycleTask ${f.task.id} ${f.task.status}`;
    case "replyLifecycle":
      return `  F replyLifecycle ${f.task.id} ${f.reply}`;
    case "modelLoadStarted":
      return `  F modelLoad ${f.workerId} ${f.model} ${f.reason} evicting=${f.evicting}`;
    case "modelLoadFinished":
      return `  F modelLoaded ${f.workerId} ${f.model} ${f.loadMs}`;
    case "modelEvicted":
      return `  F modelEvicted ${f.workerId} ${f.model}`;
  }
}
