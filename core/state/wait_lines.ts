// Issue 30: a streaming client that waits (queued, or waiting for a model to
// load) hears from the relay before the backend's first byte, when it asked:
//
//   SSE_KEEPALIVE_SECS=N (> 0)      `: keep-alive` after N s without a line
//   header X-ModelRelay-Progress: 1 `: queued position=N` and
//                                   `: loading model=M` as its state changes
//
// The first such line opens the client's stream: the relay's SSE head (200)
// goes out then, so the backend's own head can no longer be passed on, and any
// error after it is an SSE error event (`fail`), as after a first byte. The
// commit point for requeue stays the backend's first byte: until then the
// request may still go to another worker (requeueOrFail reads the request's
// status, which these lines do not change). A request answered before its
// first line is untouched. Lines are SSE comments, which every SSE client
// skips. Only the four SSE routes take them: a line would break any other
// body.
//
// Timing is the tick's (on_tick.ts): each tick writes the lines that are due,
// and a request is looked at once more as it is queued, so its first position
// leaves at once.
import type { Effect } from "../effect.ts";
import type { Headers } from "../vocabulary.ts";
import type { Request, State, WaitLines } from "./state.ts";

export const PROGRESS_HEADER = "x-modelrelay-progress";

/** The routes whose streams are SSE (server-sent events take comment lines). */
const SSE_ROUTES: ReadonlySet<string> = new Set([
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/responses",
  "/v1/messages",
]);

/** A new request's wait lines, or null when it gets none (not an SSE stream, or nothing asked). */
export function waitLinesFor(
  state: State,
  endpointPath: string,
  isStreaming: boolean,
  headers: Headers,
): WaitLines | null {
  if (!isStreaming) return null;
  const q = endpointPath.indexOf("?");
  const route = q === -1 ? endpointPath : endpointPath.slice(0, q);
  if (!SSE_ROUTES.has(route)) return null;
  const progress = headers[PROGRESS_HEADER]?.trim() === "1";
  const every = state.config.sseKeepAliveMs;
  if (!progress && every <= 0) return null;
  return {
    progress,
    opened: false,
    nextKeepAliveAtMs: every > 0 ? state.nowMs + every : null,
    lastNote: null,
  };
}

/** Whether the client's stream was opened by a wait line (its head is out). */
export function streamOpened(request: Request): boolean {
  return request.waitLines?.opened === true;
}

/** A queued request's place among those queued for its model (1 = next). */
type PositionOf = (r: Request) => number;

/** Writes the lines due for every waiting stream (each tick). */
export function writeWaitLines(state: State, out: Effect[]): void {
  let positionOf: PositionOf | null = null;
  for (const r of state.requests.values()) {
    if (r.waitLines === null || r.status.kind === "streaming") continue;
    if (r.waitLines.progress) positionOf ??= positionsNow(state);
    writeDue(state, r, r.waitLines, positionOf, out);
  }
}

/**
 * Writes the lines due for a request that just arrived (queued or sent).
 * Queued, it is the newest of its model's queue, so its place is that
 * queue's length: O(1), where a burst would otherwise rank the queue per
 * arrival.
 */
export function writeWaitLinesOf(
  state: State,
  request: Request,
  out: Effect[],
): void {
  const w = request.waitLines;
  if (w === null || request.status.kind === "streaming") return;
  const newest: PositionOf = (r) =>
    state.queues.get(r.provider)?.models.get(r.model) ?? 1;
  writeDue(state, request, w, w.progress ? newest : null, out);
}

function writeDue(
  state: State,
  r: Request,
  w: WaitLines,
  positionOf: PositionOf | null,
  out: Effect[],
): void {
  const lines: string[] = [];
  if (positionOf !== null) {
    const note = noteOf(r, positionOf);
    if (note !== null && note !== w.lastNote) {
      w.lastNote = note;
      lines.push(note);
    }
  }
  if (w.nextKeepAliveAtMs !== null && state.nowMs >= w.nextKeepAliveAtMs) {
    lines.push("keep-alive");
  }
  if (lines.length === 0) return;
  // Any line resets the keep-alive: it is for silence, not a metronome.
  if (w.nextKeepAliveAtMs !== null) {
    w.nextKeepAliveAtMs = state.nowMs + state.config.sseKeepAliveMs;
  }
  if (!w.opened) {
    w.opened = true;
    const waiting = r.status.kind === "queued" ? state.nowMs - r.queuedAtMs : 0;
    out.push({
      kind: "startStream",
      requestId: r.id,
      queueWaitMs: r.queueWaitMs + waiting,
    });
  }
  out.push({
    kind: "writeChunk",
    requestId: r.id,
    chunk: lines.map((l) => `: ${l}\n\n`).join(""),
  });
}

/**
 * Where each queued request stands: among the requests queued for the same
 * model, by arrival (enqueueSeq, kept across requeues). Priorities and tenant
 * turns may move it; the number is what is ahead of it for its model now.
 * Ranked once per tick, and only when a progress request waits.
 */
function positionsNow(state: State): PositionOf {
  // provider|model -> enqueueSeq of each queued request, ascending.
  const out = new Map<string, number[]>();
  for (const r of state.requests.values()) {
    if (r.status.kind !== "queued") continue;
    const key = `${r.provider}|${r.model}`;
    const list = out.get(key);
    if (list === undefined) out.set(key, [r.enqueueSeq]);
    else list.push(r.enqueueSeq);
  }
  for (const list of out.values()) list.sort((a, b) => a - b);
  return (r) =>
    firstAtLeast(out.get(`${r.provider}|${r.model}`) ?? [], r.enqueueSeq) + 1;
}

/**
 * The progress line for `r` now: its place in the queue, or the load its
 * worker runs for it (residency.ts sets `waitsForLoad` as it dispatches);
 * null = nothing to say (dispatched to a worker that holds its model).
 */
function noteOf(r: Request, positionOf: PositionOf): string | null {
  if (r.status.kind === "dispatched") {
    return r.waitsForLoad ? `loading model=${r.model}` : null;
  }
  return `queued position=${positionOf(r)}`;
}

/** Index of the first element >= `x` in ascending `list` (binary search). */
function firstAtLeast(list: number[], x: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (list[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
