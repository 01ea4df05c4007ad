// The one seam between the cluster runtime and its engine (issue 16): an
// append-only, totally ordered log with server timestamps, plus the few shared
// keys the log cannot replace (epoch, snapshot, API key records, op-token
// nonces). Redis implements it (redis_engine.ts); another engine (NATS
// JetStream) would implement the same methods.

/** One log entry: its engine id, its server time in ms, its payload. */
export type LogEntry = { id: string; ms: number; data: string };

export type EngineStatus = "up" | "down";

export interface ClusterEngine {
  /** Appends one entry; rejects when the engine is unreachable. */
  append(data: string): Promise<void>;
  /** Entries after `afterId` ("0" = from the start), waiting up to `blockMs` for one. */
  read(afterId: string, blockMs: number, count: number): Promise<LogEntry[]>;
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
  onStatus(listener: (status: EngineStatus) => void): void;
  close(): Promise<void>;
}
