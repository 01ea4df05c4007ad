// The cluster simulator's end-of-run invariants (issues 16, 23, 33, 34): what
// every client, worker and leave must have come to once the run is over. The
// life-cycle and the data-path invariants are judged on the same runs.
import type { InstancePhase } from "../../core/cluster/instance.ts";

export type ClusterInvariant =
  | "replicasAgree"
  | "socketEffectsOnce"
  | "fleetRateLimit"
  /** Issue 26: fleet-wide, tokens admitted ≤ limit + tokens in flight when it was reached (tokens.ts). */
  | "fleetTokenLimit"
  | "noHangOnInstanceDeath"
  | "endsOnce"
  | "streamExact"
  | "coreAccepts"
  /** Every worker is registered again once the faults are over (issue 23). */
  | "workersReturn"
  /** A graceful leave ends none of its clients' requests early (issue 23). */
  | "leaveFinishesRequests"
  /** What a client received is (a prefix of) one dispatch's answer: never two spliced (issue 23). */
  | "answerFromOneDispatch"
  /** No stream client receives more than the stream limit (issue 34: the direct path's size cut). */
  | "answerWithinLimit"
  /** Every completed request charges the tokens it used, wherever its chunks went (issue 33). */
  | "streamsCounted"
  /** A client that received a whole stream is not then given an error (issue 33 item 4). */
  | "wholeStreamsEndClean"
  /** An answer is ended for a lost link only after a link closed or an instance died or reset. */
  | "noLinkLossWithoutFault"
  /** A blink of one instance's log (held, then resumed) ends none of its started streams. */
  | "holdKeepsStreams";

export const RATE_LIMIT = 5;
export const END_MS = 60_000;
/** The fleet's stream limit (C16): "big" answers outgrow it. */
export const STREAM_CHARS_MAX = 400;

/**
 * Every request ends (answer, error, or its client gone) this soon after it
 * arrived, faults included: a queued request times out at 30 s (504) at the
 * latest, and a dead instance's dispatched requests are requeued within 4 s of
 * log time. A request stuck on a dead instance's worker until the 45 s
 * heartbeat timeout notices breaks it. (Compound faults, say a crash, a freeze
 * and a log stall together, can legitimately leave no worker for ~10 s.)
 */
export const END_WITHIN_MS = 35_000;

/** One client as the checks read it. */
type ClientView = {
  id: string;
  inst: number;
  stream: boolean;
  arrivedAtMs: number;
  endedAtMs: number | null;
  started: boolean;
  received: string;
  ends: number;
  status: number | null;
  error: boolean;
  errorCode: string | null;
};

/** What the checks read of a run (shape.ts's World has all of it). */
export type RunView = {
  s: { workers: number; rateLimited: boolean; faults: readonly string[] };
  config: { drainTimeoutMs: number };
  violations: { invariant: ClusterInvariant; detail: string }[];
  clients: Map<string, ClientView>;
  /** Per request: the whole answer of each of its dispatches. */
  answers: Map<string, Map<string, string>>;
  /** Per request: when a worker completed it, by the answer it completed. */
  completedAt: Map<string, Map<string, number>>;
  conns: Map<
    string,
    { id: string; worker: number; inst: number; open: boolean }
  >;
  insts: {
    proc: string;
    host: {
      inst: {
        phase: InstancePhase;
        cluster: { core: { workers: Map<string, unknown> } };
      };
    };
  }[];
  linksLost: boolean;
  dispatchedRl: Map<number, Set<string>>;
  leaves: {
    inst: number;
    startMs: number;
    clients: Set<string>;
    disturbed: boolean;
  }[];
  lastFaultMs: number;
};

export function violate(
  w: RunView,
  invariant: ClusterInvariant,
  detail: string,
): void {
  if (w.violations.length < 20) w.violations.push({ invariant, detail });
}

export function endOfRun(w: RunView): void {
  for (const c of w.clients.values()) {
    const waited = (c.endedAtMs ?? END_MS) - c.arrivedAtMs;
    if (waited > END_WITHIN_MS) {
      violate(
        w,
        "noHangOnInstanceDeath",
        `${c.id} (on instance ${c.inst}) waited ${waited} ms`,
      );
    }
    dataPath(w, c);
  }
  for (const [epoch, set] of w.dispatchedRl) {
    if (w.s.rateLimited && set.size > RATE_LIMIT) {
      violate(
        w,
        "fleetRateLimit",
        `${set.size} requests of tenant rl admitted in log history ${epoch}, limit ${RATE_LIMIT}/min`,
      );
    }
  }
  workersReturned(w);
  leavesFinished(w);
}

/**
 * Long after the last fault, every worker holds an open connection that its
 * instance's replica knows as registered: no handshake was left hanging.
 */
function workersReturned(w: RunView): void {
  for (let n = 0; n < w.s.workers; n++) {
    const live = [...w.conns.values()].filter((c) => c.worker === n && c.open);
    const ok = live.some((c) => {
      const inst = w.insts[c.inst]!;
      return inst.proc === "running" && inst.host.inst.phase === "serving" &&
        inst.host.inst.cluster.core.workers.has(c.id);
    });
    if (!ok) {
      violate(
        w,
        "workersReturn",
        `worker ${n} is not registered at the end (open: ${
          live.map((c) => c.id).join(",") || "none"
        }; last fault at ${w.lastFaultMs} ms)`,
      );
    }
  }
}

/**
 * A leave no other fault disturbed ends none of its clients' requests with
 * a 503 before the core's drain timeout: they finish, as on a single server.
 */
function leavesFinished(w: RunView): void {
  for (const l of w.leaves) {
    if (l.disturbed) continue;
    for (const id of l.clients) {
      const c = w.clients.get(id)!;
      const early = c.endedAtMs !== null &&
        c.endedAtMs < l.startMs + w.config.drainTimeoutMs;
      if (c.status === 503 && c.error && early) {
        violate(
          w,
          "leaveFinishesRequests",
          `${id} on leaving instance ${l.inst} ended 503 at ${c.endedAtMs} (leave began ${l.startMs})`,
        );
      }
    }
  }
}

/** What one client received, against the answers its dispatches gave. */
function dataPath(w: RunView, c: ClientView): void {
  const whole = [...(w.answers.get(c.id)?.values() ?? [])];
  const short = (t: string) => JSON.stringify(t.slice(0, 120));
  if (
    c.ends === 1 && !c.error && c.status === 200 && !whole.includes(c.received)
  ) {
    violate(w, "streamExact", `${c.id} got ${short(c.received)}`);
  }
  if (c.received !== "" && !whole.some((a) => a.startsWith(c.received))) {
    violate(
      w,
      "answerFromOneDispatch",
      `${c.id} received ${short(c.received)}`,
    );
  }
  if (c.stream && c.received.length > STREAM_CHARS_MAX) {
    violate(
      w,
      "answerWithinLimit",
      `${c.id} received ${c.received.length} chars, limit ${STREAM_CHARS_MAX}`,
    );
  }
  const doneAt = w.completedAt.get(c.id)?.get(c.received);
  if (
    c.stream && c.error && doneAt !== undefined &&
    doneAt < (c.endedAtMs ?? END_MS)
  ) {
    violate(
      w,
      "wholeStreamsEndClean",
      `${c.id} received its whole answer (completed at ${doneAt}), then ${c.status} ${c.errorCode}`,
    );
  }
  if (c.errorCode === "cluster_link_lost" && !w.linksLost) {
    violate(
      w,
      "noLinkLossWithoutFault",
      `${c.id} ended for a lost link; none was lost`,
    );
  }
  const blipOnly = w.s.faults.every((f) => f === "blip" || f === "duplicate");
  const held = c.errorCode === "cluster_unavailable" ||
    c.errorCode === "cluster_instance_reset";
  if (blipOnly && c.started && held) {
    violate(
      w,
      "holdKeepsStreams",
      `${c.id} was streaming and ended ${c.errorCode}`,
    );
  }
}
