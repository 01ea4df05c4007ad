// What virtual workers and clients may do to the run: schedule future actions
// on the virtual clock and look at a few shared facts. Implemented by run_scenario.ts.
import type { Event } from "../core/mod.ts";

export type Action =
  /** A core event delivered as is (client arrivals, aborts, socket closes, operator commands). */
  | { kind: "core"; event: Event }
  /** A text frame from a worker connection, decoded by core's eventFromFrame on arrival. */
  | { kind: "frame"; conn: string; text: string }
  /** A binary frame (chunk-bytes-v1), decoded by core's eventFromBinaryFrame on arrival. */
  | { kind: "binaryFrame"; conn: string; bytes: Uint8Array }
  /** A worker's job makes progress (next chunk or completion). */
  | { kind: "job"; host: number; conn: string; requestId: string }
  /** A worker process's timer fires (the worker core's armTimer); `gen` tells a re-armed one apart. */
  | { kind: "timer"; host: number; conn: string; timer: string; gen: number }
  /** A worker's lifecycle task takes its next step (issue 9). */
  | { kind: "lifecycle"; host: number; conn: string; taskId: string }
  /** An operator issues lifecycle operation number `op` (issue 9). */
  | { kind: "operator"; op: number }
  /** A worker host acts on its failure plan or reconnects. */
  | { kind: "host"; host: number; what: "connect" | "fault"; fault: number }
  /** A client arrives. */
  | { kind: "arrive"; client: number }
  | { kind: "tick" };

export interface World {
  /** Schedules an action at an absolute virtual time (never in the past). */
  schedule(atMs: number, action: Action): void;
  /** Whether faults are still on (false in the heal phase). */
  faultsOn(atMs: number): boolean;
  /**
   * Request ids a hostile connection can aim at and never be assigned: ended ones
   * and ones streaming from another worker (a frame for a request the core may
   * yet dispatch to the sender would be indistinguishable from a real answer).
   */
  foreignRequestIds(conn: string): string[];
  /** Whether the server closed or never accepted this connection. */
  connClosed(conn: string): boolean;
  readonly frameCharsMax: number;
  readonly streamCharsMax: number;
}
