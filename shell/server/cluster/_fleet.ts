// Test-only: a relay cluster of real processes on loopback (issue 16): a private
// redis-server, N server instances sharing it, a round-robin TCP balancer in
// front of them, the mock backend with its stats port, and workers that connect
// through the balancer. `withFleet` always stops every process.
import type { MockBackendStats } from "../../../mock/backend.ts";
import { type Child, stopInReverse, waitUntil } from "../../procs.ts";
import {
  startMockProcess,
  startServerProcess,
  startWorkerProcess,
} from "../../demo/cluster.ts";
import { type Balancer, startBalancer } from "./_balancer.ts";
import {
  type RedisProcess,
  type SentinelSet,
  startRedis,
  startSentinelSet,
} from "./_redis.ts";

export const MODEL = "mock-model";
const SECRET = "fleet-secret";

export type Instance = { child: Child; url: string; port: number };

export type Fleet = {
  /** The Redis (with `sentinel`: the one started as master). */
  redis: RedisProcess;
  /** Issue 23: master, replica and three sentinels, when asked for. */
  sentinel: SentinelSet | null;
  balancer: Balancer;
  instances: Instance[];
  workers: Child[];
  mockUrl: string;
  stats(): Promise<MockBackendStats>;
  /** The instance the balancer sent worker `i`'s latest connection to. */
  instanceOfWorker(i: number): Instance;
  /** Starts another instance on the same Redis (and adds it to the balancer). */
  addInstance(): Promise<Instance>;
};

export type FleetOptions = {
  instances?: number;
  /** `backendUrl`: this worker's own backend (default: the mock, or `backendFor`'s). */
  workers?: { name: string; maxConcurrent: number; backendUrl?: string }[];
  delayMs?: number;
  env?: Record<string, string>;
  /** Issue 23: a Sentinel set (1 master, 1 replica, 3 sentinels) instead of one Redis. */
  sentinel?: boolean;
  /** The backend URL workers get, given the mock's (e.g. a counting proxy in front of it). */
  backendFor?: (mockUrl: string) => string;
};

export async function withFleet(
  opts: FleetOptions,
  body: (f: Fleet) => Promise<void>,
): Promise<void> {
  const started: Child[] = [];
  let redis: RedisProcess | null = null;
  let sentinel: SentinelSet | null = null;
  let balancer: Balancer | null = null;
  try {
    if (opts.sentinel === true) {
      sentinel = await startSentinelSet();
      redis = sentinel.servers[0]!;
    } else redis = await startRedis();
    const { mock, statsUrl } = await startMock(opts, started);
    const env = { CLUSTER_URL: sentinel?.url ?? redis.url, ...opts.env };
    const startInstance = async (): Promise<Instance> => {
      const s = await startServerProcess({ secret: SECRET, env });
      started.push(s.child);
      return { child: s.child, url: s.url, port: Number(new URL(s.url).port) };
    };
    // One at a time: the first creates the log, the others join it.
    const instances: Instance[] = [];
    for (let i = 0; i < (opts.instances ?? 3); i++) {
      instances.push(await startInstance());
    }
    const lb = await startBalancer(instances.map((i) => i.port));
    balancer = lb;
    const workers: Child[] = [];
    const workerConn: number[] = [];
    for (const w of opts.workers ?? []) {
      const before = lb.routed.length;
      const child = await startWorkerProcess({
        name: w.name,
        serverUrl: lb.url,
        secret: SECRET,
        backendUrl: w.backendUrl ?? opts.backendFor?.(mock.url) ?? mock.url,
        maxConcurrent: w.maxConcurrent,
        // Behind a cluster, a drained instance's workers move on (README "Scaling out").
        env: { LOG_LEVEL: "debug", ON_SERVER_SHUTDOWN: "reconnect" },
      });
      started.push(child);
      workers.push(child);
      workerConn.push(before);
    }
    await everyInstanceSees(instances, workers.length);
    await body({
      redis,
      sentinel,
      balancer: lb,
      instances,
      workers,
      mockUrl: mock.url,
      async stats() {
        return await (await fetch(statsUrl)).json() as MockBackendStats;
      },
      instanceOfWorker(i) {
        // A worker's connections are the balancer's only ones after its start
        // (clients in these tests call instances directly); the latest is live.
        const mine = lb.routed.slice(workerConn[i]!);
        const port = mine[0]!;
        return instances.find((x) => x.port === port)!;
      },
      async addInstance() {
        const i = await startInstance();
        instances.push(i);
        lb.backends.push(i.port);
        return i;
      },
    });
  } finally {
    await stopInReverse(started, 3_000);
    await balancer?.close();
    if (sentinel !== null) await sentinel.stop();
    else await redis?.stop();
  }
}

async function everyInstanceSees(
  instances: Instance[],
  workers: number,
): Promise<void> {
  await waitUntil("every instance to see every worker", async () => {
    for (const i of instances) {
      const h = await (await fetch(`${i.url}/health`)).json();
      if (h.workers_connected !== workers) return false;
    }
    return true;
  });
}

/** The mock backend with its stats port. */
async function startMock(opts: FleetOptions, started: Child[]) {
  const mock = await startMockProcess({
    script: "e2e/_mock_with_stats.ts",
    delayMs: opts.delayMs ?? 30,
    models: [MODEL],
  });
  started.push(mock.child);
  const statsUrl = (await mock.child.waitForLine(/stats on (\S+)/))[1]!;
  return { mock, statsUrl };
}

/** Waits (15 s at most) until every instance's /health says the cluster is up with both of a two-worker fleet's workers. */
export async function everyInstanceUp(f: Fleet): Promise<void> {
  await waitUntil("every instance up with both workers", async () => {
    for (const i of f.instances) {
      const h = await (await fetch(`${i.url}/health`)).json();
      if (h.cluster?.up !== true || h.workers_connected !== 2) return false;
    }
    return true;
  }, 15_000);
}

/**
 * Two instances and one worker (taking 2 at once) in front of `backendUrl`,
 * `env` on both; `fn` gets the instance holding the worker and the other one,
 * where a client's stream comes to it over the direct path.
 */
export function withHolderAndClient(
  worker: string,
  backendUrl: string,
  env: Record<string, string>,
  fn: (at: { holder: Instance; client: Instance; f: Fleet }) => Promise<void>,
): Promise<void> {
  return withFleet({
    instances: 2,
    workers: [{ name: worker, maxConcurrent: 2 }],
    env,
    backendFor: () => backendUrl,
  }, (f) => {
    const holder = f.instanceOfWorker(0);
    return fn({ holder, client: f.instances.find((i) => i !== holder)!, f });
  });
}
