// What instances of one cluster append to the shared log (issue 16). The core's
// input is shared, not its state: a record carries the events one instance
// observed, and every replica applies every record, in log order, with the log's
// own timestamp as `atMs`. Plain data only; the shell encodes it as JSON.
import type { Event, RequestId, WorkerId } from "../events/event.ts";

export type InstanceId = string;

/** Why an answer was ended outside the log (issue 23; core/cluster/data_path.ts). */
export type CutReason = "idle" | "too_large" | "link_lost";

/**
 * Bumped whenever a change to core/ could make two replicas reduce the same log
 * differently: instances of different versions refuse to share a log.
 */
export const REDUCER_VERSION = "30.3";

export type ClusterRecord =
  | {
    kind: "events";
    instance: InstanceId;
    /** Per-instance sequence number: a retried append is applied once. */
    seq: number;
    /** Log time (ms) of the last record this instance had applied; null before any. */
    appliedMs: number | null;
    events: Event[];
    /**
     * The direct data path (issue 23): where this instance takes answer pieces
     * from its peers (its advertised URL), set on every record of an instance
     * that has one.
     */
    peer?: string;
    /**
     * Per request ended by an event of this record: how many pieces went
     * direct before it (the receiver holds the end until they arrived).
     */
    direct?: Record<RequestId, number>;
    /**
     * Per request ended by an event of this record: the content deltas its
     * pieces sent direct carried (issue 33: counted where the chunks are
     * routed, added to the request's count before the end is applied).
     */
    deltas?: Record<RequestId, number>;
  }
  /**
   * An answer the data path ended outside the log (issue 23): its size limit,
   * the stream idle limit kept by the client's instance (C48), a broken link.
   */
  | {
    kind: "cut";
    instance: InstanceId;
    seq: number;
    appliedMs: number | null;
    requestId: RequestId;
    workerId: WorkerId;
    reason: CutReason;
    /** Content deltas sent direct before the cut (the sender's count, issue 33). */
    deltas?: number;
  }
  /** An instance leaves (graceful stop), or an instance rejoining retires its old id. */
  | {
    kind: "left";
    instance: InstanceId;
    seq: number;
    appliedMs: number | null;
    who: InstanceId;
  }
  /** Shell-level facts the core does not reduce (API keys); ordered with the rest. */
  | {
    kind: "note";
    instance: InstanceId;
    seq: number;
    appliedMs: number | null;
    note: Record<string, string | number | null>;
  };

/** A bytes chunk (chunk-bytes-v1) as the log's JSON carries it: base64. */
type LoggedBytes = { b64: string };

function isBytesChunk(
  e: Event,
): e is Extract<Event, { kind: "chunkReceived" }> & { chunk: Uint8Array } {
  return e.kind === "chunkReceived" && typeof e.chunk !== "string";
}

/**
 * A record as the log stores it: JSON, a bytes chunk's bytes in base64 (issue
 * 18), so every replica applies the very bytes the receiving instance got and
 * counts them the same way against the stream limit.
 */
export function encodeRecord(record: ClusterRecord): string {
  if (record.kind !== "events" || !record.events.some(isBytesChunk)) {
    return JSON.stringify(record);
  }
  return JSON.stringify({
    ...record,
    events: record.events.map((e) =>
      isBytesChunk(e) ? { ...e, chunk: { b64: e.chunk.toBase64() } } : e
    ),
  });
}

/** Reads a record written by encodeRecord; throws like JSON.parse on bad text. */
export function decodeRecord(text: string): ClusterRecord {
  const record = JSON.parse(text) as ClusterRecord;
  if (record.kind !== "events") return record;
  for (const e of record.events) {
    if (e.kind === "chunkReceived" && typeof e.chunk !== "string") {
      e.chunk = Uint8Array.fromBase64((e.chunk as unknown as LoggedBytes).b64);
    }
  }
  return record;
}
