// The cluster's data path (issue 23): control through the log, data direct.
//
// The log carries what the replicated core decides on; the bytes of an answer
// (streamed chunks, non-streaming body pieces) travel from the instance holding
// the worker (the sender) to the instance holding the client (the receiver),
// by a function call when that is one instance, otherwise over a direct link.
// These are the pure rules of both ends; the host (host.ts) keeps the two maps
// and hands the bytes to its ports (a peer link, or a virtual one).
//
// The commit point: a stream's first byte is logged (a `chunkReceived` with an
// empty chunk) before any of its bytes are sent, and the receiver writes no
// byte to the client before that entry is applied there (the core's
// `startStream`). Until then a request may still be requeued (its worker's
// instance died, its link broke), and the bytes held for it are dropped with
// the old dispatch: the client never sees two answers spliced together.
//
// The end: a completion travels through the log carrying how many pieces were
// sent direct before it (`ClusterRecord.direct`); the receiver holds the end
// (and anything the log says after it) until that many pieces arrived, so a
// response is never ended short of its bytes. Pieces that do not come within
// `DATA_PATH_DEFAULTS.endWaitMs` end the answer with an error, never a normal end.
import type { Effect } from "../effect.ts";
import type { Event } from "../events/event.ts";
import { answerBytesMax } from "../config.ts";
import { apiError } from "../protocol/errors.ts";
import { EXTENSION_CHUNK_BYTES } from "../protocol/messages.ts";
import type { Request, State } from "../state/state.ts";
import { countDeltas } from "../state/usage.ts";
import type { TokenCounts } from "../protocol/messages.ts";
import type {
  ChunkData,
  ClientError,
  RequestId,
  WorkerId,
} from "../vocabulary.ts";
import type { CutReason, InstanceId } from "./record.ts";

/** One piece of an answer on the direct path; `seq` counts from 0 per dispatch. */
export type DirectChunk = {
  requestId: RequestId;
  workerId: WorkerId;
  seq: number;
  chunk: ChunkData;
  /**
   * Set on a stream's last piece (its chunk empty): the worker completed the
   * stream, with these counts. The client's instance then knows the answer is
   * whole even if the log's end never reaches it (issue 33 item 4).
   */
  end?: StreamEnd;
};

/** What the sender knows of a stream it completed (its usage, issue 33). */
export type StreamEnd = {
  /** The worker's counts (`response_complete.token_counts`). */
  tokenCounts: TokenCounts | null;
  /** Content deltas the sender counted in the pieces (null: not counted for this request). */
  deltas: number | null;
};

export const DATA_PATH_DEFAULTS = {
  /** How long a logged end waits for its direct pieces before ending with an error. */
  endWaitMs: 5_000,
};

export const LINK_LOST: ClientError = apiError("cluster_link_lost");

// -- the sender: the instance holding the worker ----------------------------------

type Outgoing = {
  workerId: WorkerId;
  to: InstanceId;
  /** Pieces sent direct so far (the next `seq`). */
  sent: number;
  /** Characters (string chunks) or bytes counted against the answer's limit (C16). */
  chars: number;
  /**
   * Content deltas in the pieces sent direct, for a request the core counts
   * so (issue 26; null when it does not): logged with the end, since these
   * chunks never reach the replicas' `chunkReceived` (issue 33).
   */
  deltas: number | null;
  firstLogged: boolean;
  cut: boolean;
};

export type Senders = Map<RequestId, Outgoing>;

type ChunkEvent = Extract<Event, { kind: "chunkReceived" }>;

/** What the sender does with one chunk a worker sent. */
export type ChunkRoute =
  /** Not an answer piece the data path carries (unknown request, protocol error): the replicated core decides. */
  | { kind: "log" }
  /** The answer was already cut: the chunk goes nowhere. */
  | { kind: "drop" }
  /** Append `commit` first when set (the stream's first byte), then send `piece` to `to`. */
  | {
    kind: "direct";
    to: InstanceId;
    commit: ChunkEvent | null;
    piece: DirectChunk;
  }
  /** The answer outgrew its limit (C16, `response_too_large`): log the cut, send nothing more. */
  | {
    kind: "cut";
    requestId: RequestId;
    workerId: WorkerId;
    reason: CutReason;
  };

/**
 * What counts against an answer's limit, as the single server counts it: a
 * stream's chunk in `chunk.length` (C16), a non-streaming piece in UTF-8 bytes
 * (issue 24).
 */
function measure(streaming: boolean, chunk: ChunkData): number {
  if (streaming || typeof chunk !== "string") return chunk.length;
  return UTF8.encode(chunk).length;
}

function limitOf(core: State, streaming: boolean): number {
  return streaming ? core.config.streamCharsMax : answerBytesMax(core.config);
}

const UTF8 = new TextEncoder();

/**
 * Routes one chunk. `core` is this instance's replica, `clientOwner` the
 * instance holding the request's client (the replica's `requestOwner`).
 */
export function routeChunk(
  senders: Senders,
  core: State,
  clientOwner: InstanceId | undefined,
  e: ChunkEvent,
): ChunkRoute {
  const request = core.requests.get(e.requestId);
  if (
    request === undefined || request.status.kind === "queued" ||
    request.status.workerId !== e.workerId || clientOwner === undefined
  ) return { kind: "log" };
  if (
    typeof e.chunk !== "string" &&
    core.workers.get(e.workerId)?.extensions.includes(EXTENSION_CHUNK_BYTES) !==
      true
  ) return { kind: "log" }; // the core's protocol error (C41)
  let s = senders.get(e.requestId);
  if (s === undefined || s.workerId !== e.workerId) {
    s = {
      workerId: e.workerId,
      to: clientOwner,
      sent: 0,
      chars: 0,
      deltas: request.deltas === null ? null : 0,
      firstLogged: false,
      cut: false,
    };
    senders.set(e.requestId, s);
  }
  if (s.cut) return { kind: "drop" };
  s.chars += measure(request.isStreaming, e.chunk);
  if (s.chars > limitOf(core, request.isStreaming)) {
    s.cut = true;
    return {
      kind: "cut",
      requestId: e.requestId,
      workerId: e.workerId,
      reason: "too_large",
    };
  }
  // Counted where the chunk is routed: the replicas never see it (issue 33).
  if (s.deltas !== null) s.deltas += countDeltas(e.chunk, request.endpointPath);
  let commit: ChunkEvent | null = null;
  if (request.isStreaming && !s.firstLogged) {
    commit = {
      kind: "chunkReceived",
      atMs: e.atMs,
      workerId: e.workerId,
      requestId: e.requestId,
      chunk: "",
    };
  }
  s.firstLogged = true;
  return {
    kind: "direct",
    to: s.to,
    commit,
    piece: {
      requestId: e.requestId,
      workerId: e.workerId,
      seq: s.sent++,
      chunk: e.chunk,
    },
  };
}

/**
 * A worker event that ends its answer (completion, error): how many pieces went
 * direct before it (logged with the event), or null when none did. The
 * sender forgets the answer.
 */
export function piecesBefore(
  senders: Senders,
  e: Event,
): { requestId: RequestId; pieces: number; deltas: number | null } | null {
  if (e.kind !== "completeReceived" && e.kind !== "workerErrorReceived") {
    return null;
  }
  if (e.requestId === null) return null;
  const s = senders.get(e.requestId);
  if (s === undefined || s.workerId !== e.workerId) return null;
  senders.delete(e.requestId);
  return s.sent > 0
    ? { requestId: e.requestId, pieces: s.sent, deltas: s.deltas }
    : null;
}

type CompleteEvent = Extract<Event, { kind: "completeReceived" }>;

/** What the sender does with an event that ends an answer. */
export type EndRoute = {
  /** The event to log: a completion without its body when the body went direct. */
  event: Event;
  /** Pieces sent direct before it (the body included); null when none. */
  pieces: number | null;
  /** Content deltas in those pieces, for the replicas' usage (null: none counted). */
  deltas: number | null;
  /** The completion's body (text, then bytes) as the answer's last pieces, for `to`. */
  last: { to: InstanceId; pieces: DirectChunk[] } | null;
  /** The body takes the answer over its limit: the answer is cut first. */
  cut: boolean;
};

/**
 * A worker event that ends its answer. A completion's body is answer bytes
 * too: it goes direct as the last piece and the completion is logged without
 * it, except after a stream began with a failing status (the core drops that
 * body: it must never reach the client as stream data) or where the data path
 * does not carry the answer (the core judges it as before).
 */
export function routeEnd(
  senders: Senders,
  core: State,
  clientOwner: InstanceId | undefined,
  e: Event,
): EndRoute {
  const plain = (): EndRoute => {
    const before = piecesBefore(senders, e);
    return {
      event: e,
      pieces: before?.pieces ?? null,
      deltas: before?.deltas ?? null,
      last: null,
      cut: false,
    };
  };
  if (e.kind !== "completeReceived") return plain();
  const request = core.requests.get(e.requestId);
  if (
    request === undefined || request.status.kind === "queued" ||
    request.status.workerId !== e.workerId || clientOwner === undefined
  ) return plain();
  const s = senders.get(e.requestId);
  const sender = s !== undefined && s.workerId === e.workerId ? s : null;
  if (sender?.cut === true) return plain();
  const began = sender?.firstLogged === true;
  if (request.isStreaming && began && e.statusCode >= 400) return plain();
  // A stream that went direct ends with a marked piece (issue 33 item 4).
  const ends = request.isStreaming && began;
  if (!ends && e.body.length === 0 && e.bodyBase64 === undefined) {
    return plain();
  }
  senders.delete(e.requestId);
  const sent = sender?.sent ?? 0;
  // A stream's completion carries text only; a whole answer may end in bytes.
  const bytes = !request.isStreaming && e.bodyBase64 !== undefined
    ? Uint8Array.fromBase64(e.bodyBase64)
    : null;
  const chunks: ChunkData[] = [e.body, ...(bytes === null ? [] : [bytes])]
    .filter((c) => c.length > 0);
  const total = chunks.reduce(
    (n, c) => n + measure(request.isStreaming, c),
    sender?.chars ?? 0,
  );
  const deltas = sender?.deltas ?? null;
  if (total > limitOf(core, request.isStreaming)) {
    return {
      event: e,
      pieces: sent > 0 ? sent : null,
      deltas,
      last: null,
      cut: true,
    };
  }
  const { bodyBase64: _moved, ...rest } = e;
  const event: CompleteEvent = bytes === null
    ? { ...e, body: "" }
    : { ...rest, body: "" };
  const pieces: DirectChunk[] = chunks.map((chunk, i) => ({
    requestId: e.requestId,
    workerId: e.workerId,
    seq: sent + i,
    chunk,
  }));
  if (ends) {
    pieces.push({
      requestId: e.requestId,
      workerId: e.workerId,
      seq: sent + chunks.length,
      chunk: "",
      end: { tokenCounts: e.tokenCounts, deltas },
    });
  }
  return {
    event,
    pieces: sent + pieces.length,
    deltas,
    last: { to: sender?.to ?? clientOwner, pieces },
    cut: false,
  };
}

/**
 * The link to `to` broke: every answer still being sent there may have lost
 * pieces, so each is cut (`link_lost`), as a worker socket that died would.
 */
export function linkBroke(
  senders: Senders,
  to: InstanceId,
): SenderCut[] {
  const cut: SenderCut[] = [];
  for (const [requestId, s] of senders) {
    if (s.to !== to || s.cut || s.sent === 0) continue;
    s.cut = true;
    cut.push({ requestId, workerId: s.workerId, deltas: s.deltas });
  }
  return cut;
}

/** An answer the sender cut, with the content deltas it had sent (its usage). */
export type SenderCut = {
  requestId: RequestId;
  workerId: WorkerId;
  deltas: number | null;
};

/** The deltas the sender counted for an answer it is cutting (null: none). */
export function sentDeltas(
  senders: Senders,
  requestId: RequestId,
  workerId: WorkerId,
): number | null {
  const s = senders.get(requestId);
  return s !== undefined && s.workerId === workerId ? s.deltas : null;
}

/** Drops the sender's record of answers the replica no longer has (cancelled, timed out). */
export function forgetSent(senders: Senders, core: State): void {
  for (const [id, s] of senders) {
    const r = core.requests.get(id);
    if (
      r === undefined || r.status.kind === "queued" ||
      r.status.workerId !== s.workerId
    ) senders.delete(id);
  }
}

// -- the receiver: the instance holding the client --------------------------------

type Incoming = {
  /** The dispatch's worker; "" while no dispatch was applied here yet. */
  workerId: WorkerId;
  /**
   * The replica's request as dispatched (kept by reference: a replica reset
   * does not take it away), for the usage record of a stream whose log end
   * never comes (issue 33 item 4).
   */
  request: Request | null;
  /** The sender's marked last piece arrived: the stream is whole. */
  complete: StreamEnd | null;
  /** The instance the pieces come from (null: none yet). */
  from: InstanceId | null;
  /**
   * Issue 33: the instance holding the dispatch's worker, by the replica (null:
   * not known here). A piece of this dispatch is taken only from a link of
   * that instance: a link's claim to be some instance proves only that it
   * holds the cluster secret, not that it serves this answer.
   */
  sender: InstanceId | null;
  /** The commit (`startStream`) was applied: pieces go to the client as they come. */
  committed: boolean;
  /** Pieces arrived (the next `seq`). */
  arrived: number;
  /** Pieces held: before the commit, or all of a non-streaming body. */
  held: ChunkData[];
  /** Receiver time of the latest piece or the commit (the C48 idle limit). */
  lastAtMs: number;
  idleReported: boolean;
  /** Pieces the log says were sent before its end; null until it says. */
  expected: number | null;
  /** Effects of the log for this request held until `expected` pieces arrived. */
  tail: Effect[];
  waitingSinceMs: number | null;
  /**
   * Pieces of a dispatch this instance has not applied yet: the worker's
   * instance applied it first and its worker answered before this instance
   * read that far. Kept until that dispatch is applied here (or the answer
   * ends); pieces of an earlier dispatch wait here in vain and go with it.
   */
  early: { piece: DirectChunk; from: InstanceId }[];
};

export type Receivers = Map<RequestId, Incoming>;

/** What the receiver does: write a piece to the client, or carry out a client effect. */
export type ReceiverAction =
  | { kind: "write"; requestId: RequestId; chunk: ChunkData }
  | { kind: "run"; effect: Effect };

function fresh(
  workerId: WorkerId,
  nowMs: number,
  request: Request | null = null,
  sender: InstanceId | null = null,
): Incoming {
  return {
    workerId,
    request,
    complete: null,
    from: null,
    sender,
    committed: false,
    arrived: 0,
    held: [],
    lastAtMs: nowMs,
    idleReported: false,
    expected: null,
    tail: [],
    waitingSinceMs: null,
    early: [],
  };
}

/**
 * The replica dispatched a request whose client is here: pieces from
 * `workerId` are now the answer (those that came early are taken now). A
 * requeue replaces the earlier dispatch: pieces held for it are dropped.
 */
export function dispatched(
  rx: Receivers,
  requestId: RequestId,
  workerId: WorkerId,
  nowMs: number,
  request: Request | null = null,
  /** The instance holding `workerId`, by the replica (null: not known). */
  sender: InstanceId | null = null,
): ReceiverAction[] {
  const early = rx.get(requestId)?.early ?? [];
  rx.set(requestId, fresh(workerId, nowMs, request, sender));
  const out: ReceiverAction[] = [];
  for (const e of early) {
    if (e.piece.workerId !== workerId) continue;
    for (const a of pieceArrived(rx, e.piece, e.from, nowMs)) out.push(a);
  }
  return out;
}

/** A piece arrived (`from` this instance or a peer). */
export function pieceArrived(
  rx: Receivers,
  piece: DirectChunk,
  from: InstanceId,
  nowMs: number,
): ReceiverAction[] {
  let s = rx.get(piece.requestId);
  if (s === undefined) {
    s = fresh("", nowMs);
    rx.set(piece.requestId, s);
  }
  // Not the dispatch applied here: a later one (kept) or an earlier one.
  if (s.workerId !== piece.workerId) {
    s.early.push({ piece, from });
    return [];
  }
  if (s.sender !== null && from !== s.sender) {
    return [{ kind: "run", effect: refusedPiece(piece, from, s.sender) }];
  }
  if (piece.seq < s.arrived) return []; // a duplicate
  const out: ReceiverAction[] = [];
  // A gap: pieces were lost with a link that broke (its sender died). The
  // answer cannot be whole: it ends with an error, never short.
  if (piece.seq > s.arrived) {
    endShort(rx, piece.requestId, s, out);
    return out;
  }
  s.arrived = piece.seq + 1;
  s.from = from;
  s.lastAtMs = nowMs;
  if (piece.end !== undefined) s.complete = piece.end;
  // Committed: out at once (before any end the log holds for it); else held.
  if (piece.chunk.length === 0) {
    // The end marker carries no bytes.
  } else if (s.committed) {
    out.push({ kind: "write", requestId: piece.requestId, chunk: piece.chunk });
  } else s.held.push(piece.chunk);
  if (s.expected !== null && s.arrived >= s.expected) {
    releaseTail(rx, piece.requestId, s, out);
  }
  return out;
}

/** The warning for a piece refused: it came from another instance than its worker's. */
function refusedPiece(
  piece: DirectChunk,
  from: InstanceId,
  sender: InstanceId,
): Effect {
  return {
    kind: "log",
    level: "warn",
    message:
      "peer piece refused: its link is not from the instance holding its worker",
    fields: {
      request_id: piece.requestId,
      worker_id: piece.workerId,
      from,
      worker_instance: sender,
    },
  };
}

/** The log said how many pieces were sent before the end it carries (applied before that end). */
export function expectPieces(
  rx: Receivers,
  requestId: RequestId,
  pieces: number,
): void {
  const s = rx.get(requestId);
  if (s !== undefined) s.expected = pieces;
}

/** One client effect of the replica for a request whose client is here, in log order. */
export function logEffect(
  rx: Receivers,
  effect: Effect,
  nowMs: number,
): ReceiverAction[] {
  if (!("requestId" in effect) || effect.kind === "requestFinished") {
    return [{ kind: "run", effect }];
  }
  const s = rx.get(effect.requestId);
  if (s === undefined) return [{ kind: "run", effect }];
  if (s.expected !== null && s.arrived < s.expected) {
    s.tail.push(effect);
    s.waitingSinceMs ??= nowMs;
    return [];
  }
  const out: ReceiverAction[] = [];
  carryOut(rx, effect.requestId, s, effect, out, nowMs);
  return out;
}

function carryOut(
  rx: Receivers,
  requestId: RequestId,
  s: Incoming,
  effect: Effect,
  out: ReceiverAction[],
  nowMs: number,
): void {
  switch (effect.kind) {
    case "startStream":
      s.committed = true;
      s.lastAtMs = nowMs;
      out.push({ kind: "run", effect });
      for (const chunk of s.held) out.push({ kind: "write", requestId, chunk });
      s.held = [];
      return;
    case "writeChunk":
      // The commit entry's empty chunk writes nothing.
      if (effect.chunk.length > 0) out.push({ kind: "run", effect });
      return;
    case "respond": {
      rx.delete(requestId);
      if (s.held.length === 0) return void out.push({ kind: "run", effect });
      // The pieces that came direct go first, as bytes (issue 24: never
      // joined, and a binary body stays bytes).
      const bodyPieces = [
        ...s.held.map((c) => typeof c === "string" ? UTF8.encode(c) : c),
        ...(effect.bodyPieces ?? []),
      ];
      out.push({ kind: "run", effect: { ...effect, bodyPieces } });
      return;
    }
    case "endStream":
      rx.delete(requestId);
      // The client has the whole stream (its end marker came): an error the
      // fleet decided later (its worker's instance was declared gone before
      // its completion reached the log) is not appended to a complete answer
      // (issue 33 item 4; found by the simulator).
      if (effect.error !== null && s.committed && s.complete !== null) {
        out.push({ kind: "run", effect: { ...effect, error: null } });
        return;
      }
      out.push({ kind: "run", effect });
      return;
    case "respondError":
      rx.delete(requestId);
      out.push({ kind: "run", effect });
      return;
    default:
      out.push({ kind: "run", effect });
  }
}

function releaseTail(
  rx: Receivers,
  requestId: RequestId,
  s: Incoming,
  out: ReceiverAction[],
): void {
  const tail = s.tail;
  s.tail = [];
  s.expected = null;
  s.waitingSinceMs = null;
  for (const effect of tail) {
    carryOut(rx, requestId, s, effect, out, s.lastAtMs);
  }
}

/**
 * The log's end waited too long for its pieces, or their link broke: the
 * answer ends with an error (the bytes it has are already out), never short.
 */
function endShort(
  rx: Receivers,
  requestId: RequestId,
  s: Incoming,
  out: ReceiverAction[],
): void {
  rx.delete(requestId);
  s.tail = [];
  out.push({
    kind: "run",
    effect: s.committed
      ? { kind: "endStream", requestId, error: LINK_LOST }
      : { kind: "respondError", requestId, error: LINK_LOST },
  });
}

/** The inbound link from `peer` closed: ends waiting for its pieces end with an error now. */
export function peerGone(
  rx: Receivers,
  peer: InstanceId,
): ReceiverAction[] {
  const out: ReceiverAction[] = [];
  for (const [id, s] of [...rx]) {
    if (s.from === peer && s.tail.length > 0) endShort(rx, id, s, out);
  }
  return out;
}

/**
 * Time passed on the receiver: committed streams idle for `idleMs` (C48, kept
 * here and logged only when it fires: reported once each), and ends whose
 * pieces did not arrive within `endWaitMs` (ended with an error now).
 */
export function receiverDue(
  rx: Receivers,
  nowMs: number,
  idleMs: number,
  endWaitMs: number = DATA_PATH_DEFAULTS.endWaitMs,
): {
  idle: { requestId: RequestId; workerId: WorkerId }[];
  actions: ReceiverAction[];
} {
  const idle: { requestId: RequestId; workerId: WorkerId }[] = [];
  const actions: ReceiverAction[] = [];
  for (const [id, s] of [...rx]) {
    if (s.workerId === "" && nowMs - s.lastAtMs >= endWaitMs) {
      rx.delete(id); // pieces for a dispatch never applied here: stale
    } else if (
      s.waitingSinceMs !== null && nowMs - s.waitingSinceMs >= endWaitMs
    ) {
      endShort(rx, id, s, actions);
    } else if (
      s.committed && !s.idleReported && s.tail.length === 0 &&
      nowMs - s.lastAtMs >= idleMs
    ) {
      s.idleReported = true;
      idle.push({ requestId: id, workerId: s.workerId });
    }
  }
  return { idle, actions };
}

/**
 * A stream whose client is here and whose marked last piece arrived (the
 * client has the whole answer), with the request as dispatched: null for any
 * other.
 */
export function completedStream(
  rx: Receivers,
  requestId: RequestId,
): { request: Request; end: StreamEnd } | null {
  const s = rx.get(requestId);
  if (s === undefined || s.complete === null || s.request === null) return null;
  return s.committed && s.tail.length === 0
    ? { request: s.request, end: s.complete }
    : null;
}

/** The request ended without a client effect (cancelled, client gone): nothing more to hold. */
export function requestEnded(rx: Receivers, requestId: RequestId): void {
  const s = rx.get(requestId);
  if (s !== undefined && s.tail.length === 0) rx.delete(requestId);
}
