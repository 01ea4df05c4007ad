// GET /v1/capabilities (spec 004) for the whole fleet, or one worker: what the
// workers reported (capabilities-v1) merged with what the relay knows itself
// (acked models, lifecycle tasks, its queue and wait times). Read-only view.
import { queueDepth } from "../queries.ts";
import { modelStatuses } from "../state/lifecycle.ts";
import type { State, Worker } from "../state/state.ts";
import { effectiveLoad } from "../state/workers.ts";
import { VERSION } from "../version.ts";
import { fleetHealth } from "./health.ts";

/** Queue waits, from the shell's metrics histogram (the core keeps no history). */
export type WaitStats = { avgWaitMs: number; p95WaitMs: number };

/** Numeric resources that add up across workers. */
const SUMMED = [
  "gpuMemoryTotalMB",
  "gpuMemoryUsedMB",
  "gpuMemoryFreeMB",
  "kvCacheSizeMB",
];
const AVERAGED = ["gpuUtilization", "kvCacheUtilization"];

function resourcesOf(workers: Worker[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const reported = workers.map((w) => w.capabilities?.resources ?? null)
    .filter((r): r is Record<string, unknown> => r !== null);
  if (reported.length === 0) return out;
  for (const k of SUMMED) {
    const vals = reported.map((r) => r[k]).filter((v) => typeof v === "number");
    if (vals.length > 0) out[k] = vals.reduce((a, b) => a + b, 0);
  }
  for (const k of AVERAGED) {
    const vals = reported.map((r) => r[k]).filter((v) => typeof v === "number");
    if (vals.length > 0) {
      out[k] = Math.round(
        vals.reduce((a, b) => a + b, 0) / vals.length * 1000,
      ) /
        1000;
    }
  }
  const gpuIds = reported.flatMap((r) =>
    Array.isArray(r.gpuIds) ? r.gpuIds : []
  );
  if (gpuIds.length > 0) out.gpuIds = gpuIds;
  return out;
}

function flagsOf(
  workers: Worker[],
  multiTenant: boolean,
): Record<string, boolean> {
  // The relay itself streams and keeps tenants apart (unless
  // ENABLE_MULTI_TENANT=false); the rest is any worker's.
  const flags: Record<string, boolean> = {
    streaming: true,
    prefixCaching: false,
    multiTenant,
    visionInput: false,
    audioInput: false,
    functionCalling: false,
  };
  for (const w of workers) {
    for (const [k, v] of Object.entries(w.capabilities?.capabilities ?? {})) {
      if (v === true) flags[k] = true;
      else if (!(k in flags) && typeof v === "boolean") flags[k] = v;
    }
  }
  return flags;
}

function workerEntry(w: Worker): Record<string, unknown> {
  return {
    workerId: w.id,
    name: w.name,
    extensions: w.extensions,
    models: w.models.filter((m) => m !== "*"),
    load: effectiveLoad(w),
    maxConcurrent: w.maxConcurrent,
    draining: w.draining,
    reported: w.capabilities,
  };
}

/**
 * The spec 004 document; null when `workerId` names no connected worker.
 * Without `detail` (anyone but the admin, issue 15) it describes the fleet
 * only: no worker ids, names, loads or task ids.
 */
export function capabilitiesView(
  state: State,
  waits: WaitStats,
  workerId: string | null,
  detail = true,
): Record<string, unknown> | null {
  let workers = [...state.workers.values()];
  if (workerId !== null) {
    const w = state.workers.get(workerId);
    if (w === undefined) return null;
    workers = [w];
  }
  const statuses = modelStatuses(state, workers);
  const loadedIds = new Set(statuses.map((m) => m.id));
  const available = new Set<string>();
  for (const w of workers) {
    for (const id of w.capabilities?.models?.available ?? []) {
      if (!loadedIds.has(id)) available.add(id);
    }
  }
  const one = workerId === null ? null : workers[0]!;
  return {
    runnerType: one?.capabilities?.runnerType ?? `modelrelay-${VERSION}`,
    runnerId: one === null ? "modelrelay" : one.id,
    models: {
      loaded: statuses.filter((m) => m.status === "loaded").map((m) => {
        const reported = workers.flatMap((w) =>
          w.capabilities?.models?.loaded?.filter((l) =>
            l.id === m.id
          ) ?? []
        )[0];
        return {
          ...reported,
          id: m.id,
          ...(detail ? { workers: m.workers } : {}),
        };
      }),
      loading: statuses.filter((m) => m.status === "loading").map((m) => ({
        id: m.id,
        progress: m.progress ?? 0,
        eta: m.eta ?? null,
        ...(m.taskId === undefined || !detail ? {} : { taskId: m.taskId }),
        ...(detail ? { workers: m.workers } : {}),
      })),
      available: [...available],
    },
    resources: resourcesOf(workers),
    queue: {
      depth: queueDepth(state),
      maxDepth: state.config.queueLenMax,
      avgWaitMs: waits.avgWaitMs,
      p95WaitMs: waits.p95WaitMs,
    },
    capabilities: flagsOf(workers, state.config.multiTenant),
    health: fleetHealth(state, workers),
    ...(detail ? { workers: workers.map(workerEntry) } : {}),
  };
}
