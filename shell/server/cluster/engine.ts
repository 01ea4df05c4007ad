// The one seam between the cluster runtime and its engine (issue 16): an
// append-only, totally ordered log with server timestamps, plus the few shared
// keys the log cannot replace (epoch, snapshot, API key records, op-token
// nonces). Redis implements it (redis_engine.ts); another engine (NATS
// JetStream) would implement the same methods.

/** One log entry: its engine id, its server time in ms, its payload. */
export type LogEntry = { id: string; ms: number; data: string };

/**
 * What the engine reports (issue 23): "down" when the log is lost, everything
 * pending rejected; "up" when it is usable again. A dropped connection alone
 * is not reported: it is reconnected and what was pending is sent again.
 */
export type EngineStatus = "up" | "down";

/**
 * Why the log went down:
 * - "silent": no connection, or no answer, for CLUSTER_LOG_TIMEOUT_MS;
 * - "reset": reachable, but the log is not the one this instance applied (a
 *   new epoch: Redis came back empty; or the last entry read here is gone: a
 *   failover to a replica that lagged). The replica must be rebuilt from the
 *   snapshot. "up" follows at once.
 */
export type EngineLoss = { kind: "silent" | "reset"; detail: string };

export interface ClusterEngine {
  /**
   * Appends one entry, after the ones appended before it. Resolves once it is
   * in the log (and on a replica, when the master has one online); across a
   * dropped connection it is resent, so it may land twice (records carry
   * (instance, seq): replicas drop the second copy). Rejects when the log is
   * declared lost ("down").
   */
  append(data: string): Promise<void>;
  /** Entries after `afterId` ("0" = from the start), waiting up to `blockMs` (at most 1 s) for one. */
  read(afterId: string, blockMs: number, count: number): Promise<LogEntry[]>;
  /**
   * Whether the log still holds entry `id` (a trim or a failover to a lagging
   * replica removes it). Not a read: the engine's own tail check is untouched.
   */
  holds(id: string): Promise<boolean>;
  /** The log's epoch, created on first use: a new epoch means the log was reset. */
  epoch(): Promise<string>;
  /** Stores `value` under `key` unless set; returns what is stored. */
  setIfAbsent(key: string, value: string): Promise<string>;
  getSnapshot(): Promise<{ id: string; epoch: string; data: string } | null>;
  /** Stores a snapshot taken after entry `id`, then drops entries before `trimBeforeId`. */
  putSnapshot(
    snapshot: { id: string; epoch: string; data: string },
    trimBeforeId: string | null,
  ): Promise<void>;
  /** true for the first claimer of `key` fleet-wide; kept until `expiresAtSecs` (unix). */
  claimOnce(key: string, expiresAtSecs: number): Promise<boolean>;
  /** Durable records (API keys): all of them, set one, delete one. */
  recordsAll(): Promise<Record<string, string>>;
  recordSet(id: string, value: string): Promise<void>;
  recordDelete(id: string): Promise<void>;
  /** `loss` says why, with "down"; null with "up". */
  onStatus(
    listener: (status: EngineStatus, loss: EngineLoss | null) => void,
  ): void;
  close(): Promise<void>;
}
