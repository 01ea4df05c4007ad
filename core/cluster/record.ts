// What instances of one cluster append to the shared log (issue 16). The core's
// input is shared, not its state: a record carries the events one instance
// observed, and every replica applies every record, in log order, with the log's
// own timestamp as `atMs`. Plain data only; the shell encodes it as JSON.
import type { Event } from "../events/event.ts";

export type InstanceId = string;

/**
 * Bumped whenever a change to core/ could make two replicas reduce the same log
 * differently: instances of different versions refuse to share a log.
 */
export const REDUCER_VERSION = "16.1";

export type ClusterRecord =
  | {
    kind: "events";
    instance: InstanceId;
    /** Per-instance sequence number: a retried append is applied once. */
    seq: number;
    /** Log time (ms) of the last record this instance had applied; null before any. */
    appliedMs: number | null;
    events: Event[];
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
