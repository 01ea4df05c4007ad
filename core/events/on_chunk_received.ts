// The streaming hot path (C15, C16): one lookup, a few counter updates, one
// `writeChunk` carrying the very string the frame carried, or with
// chunk-bytes-v1 (issue 18) the very bytes (a subarray of the binary frame).
// O(1), no copies. The stream limit counts `chunk.length`: UTF-16 units of a
// string, bytes of a binary chunk (never fewer than its characters).
import { answerTooLarge, apiError } from "../protocol/errors.ts";
import type { Effect } from "../effect.ts";
import { answerBytesMax, answerLimit } from "../config.ts";
import { EXTENSION_CHUNK_BYTES } from "../protocol/messages.ts";
import { recordBackendSuccess } from "../state/backend_circuit.ts";
import { cutAnswer } from "../state/cut_answer.ts";
import { noteServed } from "../state/residency.ts";
import { pumpQueue } from "../state/requests.ts";
import type { Request, State } from "../state/state.ts";
import type { ChunkData } from "../vocabulary.ts";
import { countDeltas } from "../state/usage.ts";
import {
  budgetExceeded,
  countBodyPiece,
  tenantBufferBytesMax,
} from "../state/body_budget.ts";
import { streamOpened } from "../state/wait_lines.ts";
import { requestOfFrame } from "./drop_frame.ts";
import type { Event } from "./event.ts";
import { protocolViolation } from "./on_worker_frame_invalid.ts";

type E = Extract<Event, { kind: "chunkReceived" }>;

/**
 * Ends a request whose answer outgrew its limit: a stream (C16) or a
 * non-streaming body sent in pieces (body-chunks-v1, `response_too_large`). The
 * worker gets a cancel; the request is never requeued (issue 14: its own
 * answer's size would fail it again on any worker).
 */
function cutOversized(
  state: State,
  request: Request,
  workerId: string,
  out: Effect[],
): void {
  const code = request.isStreaming ? "stream_too_large" : "response_too_large";
  const error = answerTooLarge(
    request.isStreaming,
    answerLimit(state.config, request.isStreaming),
  );
  cutAnswer(state, request, workerId, { other: code }, error, null, out);
}

/**
 * A piece of a non-streaming answer (body-chunks-v1, and tolerated from any
 * worker): kept as it came (text encoded once, bytes as they are),
 * never joined, as bytes, for the `respond` that ends the request (issue 24). Its status
 * and headers come only with the completion, so nothing can go to the client
 * before. An answer over its own limit fails 502 `response_too_large`; one
 * that fits but would take the fleet's buffered pieces past
 * `responseBufferBytesMax`, or its tenant's past their share, fails 503 `response_buffer_full` with Retry-After
 * (the relay is busy, the answer is not at fault). Neither is requeued.
 */
function keepBodyPiece(
  state: State,
  request: Request,
  workerId: string,
  chunk: ChunkData,
  out: Effect[],
): void {
  // Kept as UTF-8 bytes: counted exactly, held outside the JS heap (so the
  // heap stays small and V8 collects the frames' garbage early), and written
  // to the client without another encoding.
  const piece = typeof chunk === "string" ? UTF8.encode(chunk) : chunk;
  if (request.bodyBytes + piece.length > answerBytesMax(state.config)) {
    return cutOversized(state, request, workerId, out);
  }
  const exceeded = budgetExceeded(state, request, piece.length);
  if (exceeded !== null) {
    return cutForBudget(state, request, workerId, exceeded, out);
  }
  countBodyPiece(state, request, piece);
}

const UTF8 = new TextEncoder();

/**
 * The fleet's budget, or the tenant's share of it (issue 33.3), is spent: the
 * request fails 503 with a Retry-After of about one service time (by then the
 * answers holding the budget have most likely gone out), its worker gets a
 * cancel.
 */
function cutForBudget(
  state: State,
  request: Request,
  workerId: string,
  exceeded: "fleet" | "tenant",
  out: Effect[],
): void {
  const code = "response_buffer_full";
  const retry = Math.min(
    state.config.retryAfterMaxSecs,
    Math.max(state.config.retryAfterSecs, Math.ceil(state.serviceMsAvg / 1000)),
  );
  const error = apiError(
    code,
    exceeded === "fleet"
      ? {
        held: state.bodyBytesBuffered - request.bodyBytes,
        max: state.config.responseBufferBytesMax,
        retryAfterSecs: retry,
      }
      : {
        held: (state.bodyBytesByTenant.get(request.tenant) ?? 0) -
          request.bodyBytes,
        max: tenantBufferBytesMax(state.config),
        tenant: request.tenant,
        retryAfterSecs: retry,
      },
  );
  const why: Effect = {
    kind: "log",
    level: "warn",
    message: "response buffer full",
    fields: {
      request_id: request.id,
      worker_id: workerId,
      buffered_bytes: state.bodyBytesBuffered,
      tenant: request.tenant,
      tenant_bytes: state.bodyBytesByTenant.get(request.tenant) ?? 0,
    },
  };
  cutAnswer(state, request, workerId, { other: code }, error, why, out);
}

/**
 * The first byte of an answer: the worker's backend is reachable (backend
 * circuit). A trial that succeeds makes the worker routable again: the queue
 * moves at once (found by the simulator: a newcomer took the slot ahead of an
 * older queued request).
 */
function backendAnswered(
  state: State,
  workerId: string,
  model: string,
  out: Effect[],
): void {
  const worker = state.workers.get(workerId);
  if (worker === undefined) return;
  const closed = recordBackendSuccess(state, worker);
  // Issue 30: an answer's first byte says the backend holds its model.
  const loaded = noteServed(state, worker, model, out);
  if (closed || loaded) pumpQueue(state, worker.provider, out);
}

/** Whether `workerId` negotiated chunk-bytes-v1 (binary chunk frames). */
function sendsBytes(state: State, workerId: string): boolean {
  return state.workers.get(workerId)?.extensions.includes(
    EXTENSION_CHUNK_BYTES,
  ) === true;
}

export function onChunkReceived(state: State, e: E, out: Effect[]): void {
  // A binary frame from a worker that did not negotiate chunk-bytes-v1 (or has
  // not registered) stays the protocol error it always was (C41).
  if (typeof e.chunk !== "string" && !sendsBytes(state, e.workerId)) {
    return protocolViolation(
      state,
      e.workerId,
      "binary frames are not part of the protocol without chunk-bytes-v1",
      out,
    );
  }
  const request = requestOfFrame(state, e, "response_chunk", out);
  if (request === undefined) return;
  const s = request.status;
  if (!request.isStreaming) {
    backendAnswered(state, e.workerId, request.model, out);
    return keepBodyPiece(state, request, e.workerId, e.chunk, out);
  }
  if (s.kind === "dispatched") {
    backendAnswered(state, e.workerId, request.model, out);
    request.status = {
      kind: "streaming",
      workerId: s.workerId,
      dispatchedAtMs: s.dispatchedAtMs,
      firstByteAtMs: state.nowMs,
      lastChunkAtMs: state.nowMs,
      charsStreamed: e.chunk.length,
    };
    // Issue 30: a wait line already opened the stream with the relay's head.
    if (!streamOpened(request)) {
      out.push({
        kind: "startStream",
        requestId: request.id,
        queueWaitMs: request.queueWaitMs,
        // stream-head-v1 (issue 25): the backend's head, once per stream.
        ...(s.head === undefined ? {} : { head: s.head }),
      });
    }
  } else if (s.kind === "streaming") {
    s.charsStreamed += e.chunk.length;
    s.lastChunkAtMs = state.nowMs;
  }
  if (
    request.status.kind === "streaming" &&
    request.status.charsStreamed > state.config.streamCharsMax
  ) {
    return cutOversized(state, request, e.workerId, out);
  }
  // Issue 26: a stream without usage is estimated from its deltas (read only).
  if (request.deltas !== null) {
    request.deltas += countDeltas(e.chunk, request.endpointPath);
  }
  out.push({ kind: "writeChunk", requestId: request.id, chunk: e.chunk });
}
