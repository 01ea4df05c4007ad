// Cluster mode's entry point (issue 16), loaded by server.ts only when
// CLUSTER_URL is set: connects the engine and starts the replicated runtime.
import type { WsConnection } from "../../ws/connection.ts";
import type { Effect, State } from "../../../core/mod.ts";
import type { Logger } from "../../log.ts";
import type { Clients } from "../http/clients.ts";
import type { ServerConfig } from "../config.ts";
import { connectRedis, DEFAULT_LOG_TIMEOUT_MS } from "./redis_engine.ts";
import { redactClusterUrl } from "./redis_url.ts";
import { type ClusterRuntime, startClusterRuntime } from "./runtime.ts";

/** What the server hands a runtime, local or clustered. */
export type RuntimeDeps = {
  state: State;
  clients: Clients;
  sockets: Map<string, WsConnection>;
  workerPending: (workerId: string) => boolean;
  workersPending: () => string[];
  runEffect: (effect: Effect) => void;
  log: Logger;
};

export async function startCluster(
  config: ServerConfig,
  d: RuntimeDeps,
): Promise<ClusterRuntime> {
  let engine;
  try {
    engine = await connectRedis(config.clusterUrl ?? "", {
      prefix: config.clusterPrefix ?? "mr:",
      logTimeoutMs: config.clusterLogTimeoutMs ?? DEFAULT_LOG_TIMEOUT_MS,
      log: d.log,
    });
  } catch (e) {
    // Named like ClusterJoinError so main.ts prints it as the reason to exit.
    const err = new Error(
      `cannot use the cluster's Redis at CLUSTER_URL=${
        redactClusterUrl(config.clusterUrl ?? "")
      }: ${(e as Error).message}`,
    );
    err.name = "ClusterJoinError";
    throw err;
  }
  try {
    return await startClusterRuntime({
      engine,
      coreConfig: config.core,
      ...(config.clusterSecret === undefined
        ? {}
        : { clusterSecret: config.clusterSecret }),
      ...(config.clusterLogLostMs === undefined
        ? {}
        : { logLostMs: config.clusterLogLostMs }),
      ...d,
    });
  } catch (e) {
    await engine.close();
    throw e;
  }
}
