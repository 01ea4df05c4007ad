// chunkFromAssigned (C32): chunks come only from the worker the request is
// assigned to, and a client answer is written only on that worker's frame.
import type { ChunkData, Event } from "../../core/mod.ts";
import type { MReq } from "../model/model.ts";
import type { Piece } from "../model/pieces.ts";
import type { Check } from "./catalog.ts";

/** A stream starts on the first chunk from its own worker. */
export function streamStartsOnItsChunk(
  check: Check,
  r: MReq,
  e: Event | null,
): void {
  check(
    r.streaming && r.status === "dispatched" &&
      e?.kind === "chunkReceived" &&
      e.workerId === r.conn && e.requestId === r.id,
    "chunkFromAssigned",
    () =>
      `startStream for ${r.id} (status ${r.status}, worker ${r.conn}) on ${e?.kind}`,
  );
}

/** A whole response answers its worker's completion (a streaming one before any chunk too, C14). */
export function respondsToItsCompletion(
  check: Check,
  r: MReq,
  e: Event | null,
): void {
  check(
    r.status === "dispatched" && e?.kind === "completeReceived" &&
      e.workerId === r.conn &&
      e.requestId === r.id,
    "chunkFromAssigned",
    () =>
      `respond for ${r.id} (worker ${r.conn}) on ${e?.kind} from ${
        (e as { workerId?: string }).workerId
      }`,
  );
}

/** A chunk is written into a started stream, on its worker's chunk or completion carrying it. */
export function chunkWrittenFromItsWorker(
  check: Check,
  r: MReq,
  e: Event | null,
  chunk: ChunkData,
): void {
  // A bytes chunk (chunk-bytes-v1) is the event's own subarray: same object.
  const fromEvent = (e?.kind === "chunkReceived" && e.chunk === chunk) ||
    (e?.kind === "completeReceived" && e.body === chunk);
  check(
    r.streaming && r.status === "streaming" && fromEvent &&
      e.workerId === r.conn && e.requestId === r.id,
    "chunkFromAssigned",
    () =>
      `writeChunk for ${r.id} (assigned ${r.conn}, status ${r.status}) on ${e?.kind}`,
  );
}

/** Each piece of a written chunk was produced for this request by its worker. */
export function pieceFromAssigned(check: Check, r: MReq, p: Piece): void {
  check(
    p.conn === r.conn && p.rid === r.id,
    "chunkFromAssigned",
    () => `${r.id} (assigned ${r.conn}) got chunk ${p.conn}|${p.rid}|${p.tag}`,
  );
}
