// The cluster simulator's end-of-run invariants (issues 16, 23): what every
// client, worker and leave must have come to once the run is over.
import type { InstancePhase } from "../core/cluster/instance.ts";

export type ClusterInvariant =
  | "replicasAgree"
  | "socketEffectsOnce"
  | "fleetRateLimit"
  /** Issue 26: fleet-wide, tokens admitted ≤ limit + tokens in flight when it was reached (cluster_tokens.ts). */
  | "fleetTokenLimit"
  | "noHangOnInstanceDeath"
  | "endsOnce"
  | "streamExact"
  | "coreAccepts"
  /** Every worker is registered again once the faults are over (issue 23). */
  | "workersReturn"
  /** A graceful leave ends none of its clients' requests early (issue 23). */
  | "leaveFinishesRequests";

export const RATE_LIMIT = 5;
export const END_MS = 60_000;

/**
 * Every request ends (answer, error, or its client gone) this soon after it
 * arrived, faults included: a queued request times out at 30 s (504) at the
 * latest, and a dead instance's dispatched requests are requeued within 4 s of
 * log time. A request stuck on a dead instance's worker until the 45 s
 * heartbeat timeout notices breaks it. (Compound faults, say a crash, a freeze
 * and a log stall together, can legitimately leave no worker for ~10 s.)
 */
export const END_WITHIN_MS = 35_000;

/** What the checks read of a run (cluster_world.ts's World has all of it). */
export type RunView = {
  s: { workers: number; rateLimited: boolean };
  config: { drainTimeoutMs: number };
  violations: { invariant: ClusterInvariant; detail: string }[];
  clients: Map<string, {
    id: string;
    inst: number;
    stream: boolean;
    arrivedAtMs: number;
    endedAtMs: number | null;
    received: string;
    ends: number;
    status: number | null;
    error: boolean;
  }>;
  conns: Map<
    string,
    { id: string; worker: number; inst: number; open: boolean }
  >;
  insts: {
    host: string;
    s: {
      phase: InstancePhase;
      cluster: { core: { workers: Map<string, unknown> } };
    };
  }[];
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
    if (c.ends === 1 && !c.error && c.status === 200) {
      const want = c.stream
        ? `data: ${c.id}:0\n\ndata: ${c.id}:1\n\ndata: ${c.id}:2\n\n`
        : `body-${c.id}`;
      if (c.received !== want) {
        violate(w, "streamExact", `${c.id} got ${JSON.stringify(c.received)}`);
      }
    }
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
      return inst.host === "running" && inst.s.phase === "serving" &&
        inst.s.cluster.core.workers.has(c.id);
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
