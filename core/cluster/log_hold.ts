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
  /**
   * Whether the last entry this replica applied is still in the log (null:
   * it applied none). Trims and a failover to a lagging replica both remove a
   * prefix or a tail: with that entry in place, everything after it is too.
   */
  lastEntryKept: boolean | null;
};

export type ResumeDecision =
  | { kind: "resume" }
  | { kind: "giveUp"; why: string };

/**
 * Resume only on the same log, within the hold limit, and when the tail after
 * this replica's position is all there to catch up on. (A first version
 * compared the stored snapshot's log time with this replica's: a log that was
 * silent for longer than the snapshot period jumps in time without losing
 * anything, and that rule gave up streams for nothing.)
 */
export function resumeAfterHold(c: ResumeCheck): ResumeDecision {
  if (c.epochNow !== c.epochMine) {
    return { kind: "giveUp", why: "the log was reset" };
  }
  if (c.nowMs - c.heldSinceMs > c.lostAfterMs) {
    return { kind: "giveUp", why: "the log was unreachable too long" };
  }
  if (c.lastEntryKept === false) {
    return {
      kind: "giveUp",
      why: "the log no longer holds this replica's last entry",
    };
  }
  return { kind: "resume" };
}
