// "The log may blink; streams do not" (issue 23): while the log is unreachable
// an instance holds what it has (its replica, its sockets, the records it
// could not append) instead of ending it, refuses new work with 503
// `cluster_unavailable`, and keeps its streams flowing on the direct path. When
// the log answers again it either resumes under the same id (catches up, then
// appends what it held, in order; retried appends are applied once by their
// sequence numbers) or gives up what it holds and rejoins as before.

export const LOG_HOLD_DEFAULTS = {
  /** CLUSTER_LOG_LOST_MS: how long the log may be unreachable before an instance gives up. */
  lostAfterMs: 15_000,
};

export type ResumeCheck = {
  /** Shell time the hold began and now (monotonic ms). */
  heldSinceMs: number;
  nowMs: number;
  lostAfterMs: number;
  /** The log's epoch now and the one this replica follows: a new epoch is a log that was reset. */
  epochNow: string;
  epochMine: string;
  /** Log time of the stored snapshot (null: none) and of this replica's last entry. */
  snapshotMs: number | null;
  appliedMs: number | null;
  snapshotEveryMs: number;
};

export type ResumeDecision =
  | { kind: "resume" }
  | { kind: "giveUp"; why: string };

/**
 * Resume only when the tail after this replica's position is still all in the
 * log: the log was not reset, and no second snapshot was taken after that
 * position (each snapshot trims the log up to the previous one, so one
 * snapshot ahead still leaves this replica's tail in place).
 */
export function resumeAfterHold(c: ResumeCheck): ResumeDecision {
  if (c.epochNow !== c.epochMine) {
    return { kind: "giveUp", why: "the log was reset" };
  }
  if (c.nowMs - c.heldSinceMs > c.lostAfterMs) {
    return { kind: "giveUp", why: "the log was unreachable too long" };
  }
  if (
    c.snapshotMs !== null && c.appliedMs !== null &&
    c.snapshotMs - c.appliedMs > c.snapshotEveryMs
  ) {
    return { kind: "giveUp", why: "the log was trimmed past this replica" };
  }
  return { kind: "resume" };
}
