// Fleet health, the one place it is judged (spec 004): GET /health's document
// and the `health` field of GET /v1/capabilities share the 90% queue rule.
import { listModels, queueDepth } from "../queries.ts";
import type { State, Worker } from "../state/state.ts";

/** Spec 004: the queue counts as saturated from 90% of MAX_QUEUE_LEN (at least one waiting). */
export function queueSaturated(state: State): boolean {
  const saturatedAt = Math.max(1, Math.ceil(state.config.queueLenMax * 0.9));
  return queueDepth(state) >= saturatedAt;
}

/** The capabilities document's verdict on `workers` (the fleet, or one worker). */
export type FleetHealth = "healthy" | "degraded" | "unhealthy";

/**
 * Unhealthy when nothing can take a request (no worker, or every one draining:
 * sim/views_test.ts checks this on every simulated step), degraded when some
 * worker reports trouble or the queue is saturated.
 */
export function fleetHealth(state: State, workers: Worker[]): FleetHealth {
  if (state.shuttingDown || workers.every((w) => w.draining)) {
    return "unhealthy";
  }
  const reports = workers.map((w) => w.capabilities?.health ?? "healthy");
  if (reports.every((h) => h !== "healthy")) return "unhealthy";
  if (reports.some((h) => h !== "healthy")) return "degraded";
  return queueSaturated(state) ? "degraded" : "healthy";
}

export type HealthAnswer = { status: 200 | 503; body: Record<string, unknown> };

/** Cluster mode (issue 16): whether this instance's shared log is reachable, as its shell knows it. */
export type ClusterHealth = {
  up: boolean;
  instance: string;
  /** Live instances in this replica's view of the fleet. */
  instances: number;
};

/**
 * GET /health: the original's fields plus spec 004's (`uptime`, `modelsLoaded`,
 * `queueDepth`). 200 while the relay can take work, including with no worker
 * connected: workers connect out to a relay that is up, so a probe that waited
 * for them would deadlock an orchestrator that starts workers after a ready
 * server. 503 only when shutting down or with the queue saturated (spec 004).
 * The fleet's state is in the body (`workers_connected`, `workers_routable`,
 * `warnings`) for whoever needs more than liveness.
 */
export function healthAnswer(
  state: State,
  version: string,
  uptimeMs: number,
  /** In cluster mode: an instance that cannot reach the log takes no work (503). */
  cluster: ClusterHealth | null = null,
): HealthAnswer {
  const depth = queueDepth(state);
  const problems: string[] = [];
  if (state.shuttingDown) problems.push("shutting down");
  if (cluster !== null && !cluster.up) {
    problems.push("relay cluster unavailable");
  }
  if (queueSaturated(state)) {
    problems.push(`queue saturated (${depth} waiting)`);
  }
  const workers = [...state.workers.values()];
  const routable = workers.filter((w) => !w.draining).length;
  const warnings: string[] = [];
  if (workers.length === 0) warnings.push("no worker connected");
  else if (routable === 0) warnings.push("every worker is draining");
  const uptime = Math.round(uptimeMs / 100) / 10;
  return {
    status: problems.length === 0 ? 200 : 503,
    body: {
      status: state.shuttingDown
        ? "shutting_down"
        : problems.length === 0
        ? "ok"
        : "unavailable",
      // Spec 004's word beside the original's `status` (issue 32): scripts
      // of the original test "ok", spec 004 clients read "healthy".
      health: problems.length === 0 ? "healthy" : "unhealthy",
      version,
      workers_connected: workers.length,
      workers_routable: routable,
      queue_depth: depth,
      uptime_secs: uptime,
      uptime,
      modelsLoaded: listModels(state).length,
      queueDepth: depth,
      ...(cluster === null ? {} : { cluster }),
      ...(problems.length === 0 ? {} : { problems }),
      ...(warnings.length === 0 ? {} : { warnings }),
    },
  };
}
