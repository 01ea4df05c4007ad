// Which instance of a cluster carries out each core effect (issue 23). Every
// replica computes every effect; exactly one instance (or, for fleet-wide
// facts, every instance) carries each out. The switch is exhaustive on purpose:
// a new effect kind fails to compile here until someone decides who runs it.
import { assertNever } from "../assert_never.ts";
import type { Effect } from "../effect.ts";
import type { RequestId, WorkerId } from "../events/event.ts";
import type { InstanceId } from "./record.ts";
import type { ClusterState } from "./replica.ts";

export type EffectOwner =
  /**
   * The instance holding the worker's socket; with `handshake`, also the one
   * holding its handshake, not yet answered (the core answers an upgrade
   * before a socket exists).
   */
  | { kind: "workerSocket"; workerId: WorkerId; handshake: boolean }
  /** The instance holding the client's connection. */
  | { kind: "client"; requestId: RequestId }
  /**
   * The instance the request came in on, by the replica's record (the client
   * may be answered already): its metrics count the request once, fleet-wide.
   */
  | { kind: "requestOrigin"; requestId: RequestId }
  /** The instance holding the HTTP call waiting for this answer (lifecycle calls). */
  | { kind: "caller" }
  /** A log line: written where its worker or request is held, else everywhere. */
  | { kind: "logLine"; fields: Record<string, string | number> }
  /** A fleet-wide fact every instance applies to its own views. */
  | { kind: "every" };

export function ownerOf(effect: Effect): EffectOwner {
  switch (effect.kind) {
    case "acceptWorker":
    case "rejectWorker":
      return {
        kind: "workerSocket",
        workerId: effect.workerId,
        handshake: true,
      };
    case "sendToWorker":
    case "closeWorker":
      return {
        kind: "workerSocket",
        workerId: effect.workerId,
        handshake: false,
      };
    case "respond":
    case "respondError":
    case "startStream":
    case "writeChunk":
    case "endStream":
      return { kind: "client", requestId: effect.requestId };
    case "cutResponse":
      // The answer was handed over, so the request (and its client record)
      // is gone: the instance still writing it finds it, the others do not.
      return { kind: "every" };
    case "requestFinished":
      return { kind: "requestOrigin", requestId: effect.requestId };
    case "replyLifecycle":
      return { kind: "caller" };
    case "log":
      return { kind: "logLine", fields: effect.fields };
    case "lifecycleTaskChanged":
      // Every instance's capabilities view and metrics follow lifecycle tasks.
      return { kind: "every" };
    case "modelLoadStarted":
    case "modelLoadFinished":
    case "modelEvicted":
      // Issue 30: counted once, fleet-wide, where the worker is held.
      return {
        kind: "workerSocket",
        workerId: effect.workerId,
        handshake: false,
      };
    case "shutdownComplete":
      // Only a core shutdown emits it, and in a cluster an instance leaves
      // through its life cycle (instance.ts), never a fleet-wide shutdown.
      return { kind: "every" };
    default:
      return assertNever(effect);
  }
}

/**
 * Whether instance `self` writes a log line with these fields: the one holding
 * the worker or request the line is about; lines about neither everywhere.
 */
export function logsOn(
  cs: ClusterState,
  self: InstanceId,
  fields: Record<string, string | number>,
): boolean {
  const w = fields.worker_id;
  const r = fields.request_id;
  if (w === undefined && r === undefined) return true;
  return (typeof w === "string" && cs.workerOwner.get(w) === self) ||
    (typeof r === "string" && cs.requestOwner.get(r) === self);
}

/** Whether `self` is where the request came in, by the replica's record. */
export function isOrigin(
  cs: ClusterState,
  self: InstanceId,
  requestId: RequestId,
): boolean {
  return cs.requestOwner.get(requestId) === self;
}
