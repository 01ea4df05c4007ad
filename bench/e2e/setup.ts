// Brings up what the scenarios run against: the backend (the mock, or the real
// one at BACKEND_URL), the relay server and a worker, plus scenario (c)'s
// timestamping backend and its worker when the mock is used.
import type { Checker, Target } from "./client.ts";
import {
  getJson,
  type Proc,
  type Relay,
  startMock,
  startRelayServer,
  startStampBackend,
  startWorker,
} from "./procs.ts";
import type { Ctx } from "./scenarios.ts";

export type Setup = { ctx: Ctx; teardown(): Promise<void> };

function target(name: "relay" | "direct", url: string): Target {
  const u = new URL(url);
  return {
    name,
    host: u.hostname,
    port: Number(u.port || (u.protocol === "https:" ? 443 : 80)),
  };
}

export async function setUp(opts: {
  backendUrl: string | null;
  model: string | null;
  rounds: number;
  withStamp: boolean;
  workerMaxConcurrent: number;
  cpuProfDir?: string;
  /**
   * Issue 16: N instances on one private Redis; clients call the first, workers
   * attach to the last, so with N > 1 every request crosses instances.
   */
  cluster?: number;
  log: (line: string) => void;
}): Promise<Setup> {
  const procs: Proc[] = [];
  let redis: { stop(): Promise<void>; url: string } | null = null;
  const teardown = async () => {
    // Reverse order: workers before the server, so the server can exit cleanly
    // (and write its CPU profile when asked).
    for (const p of procs.reverse()) {
      // A cluster instance drains before it exits: give it time to write its profile.
      await p.stop(opts.cpuProfDir === undefined ? 3000 : 20_000);
    }
    await redis?.stop();
  };
  try {
    let backendUrl = opts.backendUrl;
    let checker: Checker = "generic";
    if (backendUrl === null) {
      const mock = await startMock();
      procs.push(mock.proc);
      backendUrl = mock.url;
      checker = "mock";
    }
    backendUrl = backendUrl.replace(/\/+$/, "");
    if (new URL(backendUrl).protocol !== "http:") {
      throw new Error(
        "BACKEND_URL must be http:// (the load generator speaks plain HTTP)",
      );
    }
    let model = opts.model;
    if (model === null) {
      const listed = await getJson(`${backendUrl}/v1/models`) as {
        data?: { id?: string }[];
      };
      model = listed.data?.[0]?.id ?? null;
      if (model === null) {
        throw new Error(
          `${backendUrl}/v1/models lists no model; set BENCH_MODEL`,
        );
      }
    }
    const instances: Relay[] = [];
    if (opts.cluster !== undefined) {
      redis = await (await import("../../shell/server/cluster/_redis.ts"))
        .startRedis();
    }
    for (let i = 0; i < (opts.cluster ?? 1); i++) {
      const one = await startRelayServer({
        ...(opts.cpuProfDir === undefined
          ? {}
          : { cpuProfDir: `${opts.cpuProfDir}/i${i}` }),
        ...(redis === null ? {} : { env: { CLUSTER_URL: redis.url } }),
      });
      procs.push(one.proc);
      instances.push(one);
    }
    const relay = instances[0]!;
    const workerSide = instances[instances.length - 1]!;
    const prof = opts.cpuProfDir === undefined
      ? {}
      : { cpuProfDir: opts.cpuProfDir };
    procs.push(
      await startWorker(workerSide, backendUrl, {
        name: "bench-worker",
        models: [model],
        maxConcurrent: opts.workerMaxConcurrent,
        expectWorkers: 1,
        ...prof,
      }),
    );
    let stamp: Ctx["stamp"] = null;
    if (opts.withStamp && checker === "mock") {
      const sb = await startStampBackend();
      procs.push(sb.proc);
      procs.push(
        await startWorker(workerSide, sb.url, {
          name: "bench-stamp-worker",
          models: ["stamp-model"],
          maxConcurrent: opts.workerMaxConcurrent,
          expectWorkers: 2,
          ...prof,
        }),
      );
      stamp = {
        relay: target("relay", relay.url),
        direct: target("direct", sb.url),
      };
    }
    opts.log(
      `backend ${backendUrl} (model ${model}), relay ${relay.url} (server pid ${relay.proc.pid})${
        redis === null
          ? ""
          : `, cluster of ${instances.length} on ${redis.url}, workers on ${workerSide.url}`
      }`,
    );
    return {
      ctx: {
        relay: target("relay", relay.url),
        direct: target("direct", backendUrl),
        relayServer: relay,
        model,
        checker,
        backendUrl,
        stamp,
        rounds: opts.rounds,
        log: opts.log,
      },
      teardown,
    };
  } catch (e) {
    await teardown();
    throw e;
  }
}
