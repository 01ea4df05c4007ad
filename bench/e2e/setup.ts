// Brings up what the scenarios run against: the backend (the mock, or the real
// one at BACKEND_URL), the relay server and a worker, plus scenario (c)'s
// timestamping backend and its worker when the mock is used, and nginx in front
// of both backends when asked (issue 18).
import type { Checker, PathName, Target } from "./client.ts";
import type { CpuProcs } from "./cpu.ts";
import { ensureNginx, type Nginx, startNginx } from "./nginx.ts";
import {
  freePort,
  getJson,
  type Proc,
  type Relay,
  startMock,
  startNaiveRelay,
  startRelayServer,
  startStampBackend,
  startWorker,
} from "./procs.ts";
import type { Ctx } from "./scenarios.ts";
import { ROOT, stopInReverse } from "../../shell/procs.ts";

/** Whether the nginx path runs, and if not why (printed in the table). */
export type NginxStatus =
  | { kind: "running"; binary: string; config: string }
  | { kind: "skipped"; reason: string };

export type Setup = {
  ctx: Ctx;
  nginx: NginxStatus;
  /** Issue 23: the cluster's private Redis (for its byte counters), null without --cluster. */
  redisUrl: string | null;
  teardown(): Promise<void>;
};

function target(name: PathName, url: string): Target {
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
  /** Put nginx in front of the backend(s) as a third path (bench:e2e, not bench:ci). */
  nginx: boolean;
  /** Run the naive relay of Deno's parts (issue 31) as a fourth path. */
  naive?: boolean;
  /**
   * Issue 31: an older commit's checkout (bench/e2e/baseline.ts) whose server
   * and worker run as the path "base" beside ours.
   */
  baseline?: string;
  /** More relay server settings (issue 26: the usage ledger on or off). */
  serverEnv?: Record<string, string>;
  /** Another server entry than shell/server/main.ts (bench:ci's mutant). */
  serverEntry?: string;
  log: (line: string) => void;
}): Promise<Setup> {
  const procs: Proc[] = [];
  let redis: { stop(): Promise<void>; url: string; child: Proc } | null = null;
  let nginx: Nginx | null = null;
  const teardown = async () => {
    await nginx?.stop();
    // Reverse order: workers before the server, so the server can exit cleanly
    // (and write its CPU profile when asked).
    // A cluster instance drains before it exits: give it time to write its profile.
    await stopInReverse(procs, opts.cpuProfDir === undefined ? 3000 : 20_000);
    await redis?.stop();
  };
  try {
    let backendUrl = opts.backendUrl;
    let checker: Checker = "generic";
    /** A real backend is not ours: its CPU is not counted. */
    let backendPids: number[] = [];
    if (backendUrl === null) {
      const mock = await startMock();
      procs.push(mock.proc);
      backendUrl = mock.url;
      backendPids = [mock.proc.pid];
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
        ...(opts.serverEntry === undefined ? {} : { entry: opts.serverEntry }),
        env: {
          ...opts.serverEnv,
          ...(redis === null ? {} : { CLUSTER_URL: redis.url }),
        },
      });
      procs.push(one.proc);
      instances.push(one);
    }
    const relay = instances[0]!;
    const workerSide = instances[instances.length - 1]!;
    const prof = opts.cpuProfDir === undefined
      ? {}
      : { cpuProfDir: opts.cpuProfDir };
    const worker = await startWorker(workerSide, backendUrl, {
      name: "bench-worker",
      models: [model],
      maxConcurrent: opts.workerMaxConcurrent,
      expectWorkers: 1,
      ...prof,
    });
    procs.push(worker);
    let stampBackend: { pid: number; url: string; workerPid: number } | null =
      null;
    if (opts.withStamp && checker === "mock") {
      const sb = await startStampBackend();
      procs.push(sb.proc);
      const sw = await startWorker(workerSide, sb.url, {
        name: "bench-stamp-worker",
        models: ["stamp-model"],
        maxConcurrent: opts.workerMaxConcurrent,
        expectWorkers: 2,
        ...prof,
      });
      procs.push(sw);
      stampBackend = { pid: sb.proc.pid, url: sb.url, workerPid: sw.pid };
    }
    let nginxStatus: NginxStatus = {
      kind: "skipped",
      reason: "not asked for",
    };
    if (opts.nginx) {
      const bin = await ensureNginx(opts.log);
      if (bin.kind === "unavailable") {
        nginxStatus = { kind: "skipped", reason: bin.reason };
      } else {
        const routes = [{ name: "backend", backend: new URL(backendUrl).host }];
        if (stampBackend !== null) {
          routes.push({
            name: "stamp",
            backend: new URL(stampBackend.url).host,
          });
        }
        try {
          nginx = await startNginx(
            bin.path,
            `${ROOT}bench/results/nginx-${Deno.pid}`,
            routes,
            freePort,
          );
          nginxStatus = {
            kind: "running",
            binary: bin.path,
            config: nginx.config,
          };
        } catch (e) {
          nginxStatus = {
            kind: "skipped",
            reason: e instanceof Error ? e.message : String(e),
          };
        }
      }
      if (nginxStatus.kind === "skipped") {
        opts.log(`nginx path skipped: ${nginxStatus.reason}`);
      }
    }
    let naive: { url: string; pids: number[] } | null = null;
    if (opts.naive === true) {
      const n = await startNaiveRelay(backendUrl);
      procs.push(n.server, n.worker);
      naive = { url: n.url, pids: [n.server.pid, n.worker.pid] };
    }
    let base: { url: string; pids: number[] } | null = null;
    if (opts.baseline !== undefined) {
      const server = await startRelayServer({
        checkout: opts.baseline,
        name: "base-server",
        ...(opts.cpuProfDir === undefined
          ? {}
          : { cpuProfDir: `${opts.cpuProfDir}/base` }),
        ...(opts.serverEnv === undefined ? {} : { env: opts.serverEnv }),
      });
      procs.push(server.proc);
      const w = await startWorker(server, backendUrl, {
        name: "base-worker",
        models: [model],
        maxConcurrent: opts.workerMaxConcurrent,
        expectWorkers: 1,
        checkout: opts.baseline,
        ...prof,
      });
      procs.push(w);
      base = { url: server.url, pids: [server.proc.pid, w.pid] };
    }
    const nginxPids = nginx === null
      ? []
      : [nginx.proc.pid, ...nginx.workerPids];
    // In cluster mode the shared log is part of the relay: redis-server's CPU
    // counts as server CPU.
    const serverPids = [
      ...instances.map((i) => i.proc.pid),
      ...(redis === null ? [] : [redis.child.pid]),
    ];
    const procsMain: CpuProcs = {
      backend: backendPids,
      server: serverPids,
      worker: [worker.pid],
      nginx: nginxPids,
      naive: naive?.pids ?? [],
      base: base?.pids ?? [],
      loadgen: [Deno.pid],
    };
    const stamp: Ctx["stamp"] = stampBackend === null ? null : {
      paths: {
        relay: target("relay", relay.url),
        direct: target("direct", stampBackend.url),
        nginx: nginx === null ? null : target("nginx", nginx.urls["stamp"]!),
        naive: null,
        base: null,
      },
      procs: {
        backend: [stampBackend.pid],
        server: serverPids,
        worker: [stampBackend.workerPid],
        nginx: nginxPids,
        naive: [],
        base: [],
        loadgen: [Deno.pid],
      },
    };
    opts.log(
      `backend ${backendUrl} (model ${model}), relay ${relay.url} (server pid ${relay.proc.pid})${
        redis === null
          ? ""
          : `, cluster of ${instances.length} on ${redis.url}, workers on ${workerSide.url}`
      }${
        nginx === null
          ? ""
          : `, nginx ${
            nginx.urls["backend"]
          } (master pid ${nginx.proc.pid}, ${nginx.workerPids.length} workers)`
      }`,
    );
    return {
      ctx: {
        paths: {
          relay: target("relay", relay.url),
          direct: target("direct", backendUrl),
          nginx: nginx === null
            ? null
            : target("nginx", nginx.urls["backend"]!),
          naive: naive === null ? null : target("naive", naive.url),
          base: base === null ? null : target("base", base.url),
        },
        relayServer: relay,
        model,
        checker,
        backendUrl,
        procs: procsMain,
        stamp,
        rounds: opts.rounds,
        log: opts.log,
      },
      nginx: nginxStatus,
      redisUrl: redis === null ? null : redis.url,
      teardown,
    };
  } catch (e) {
    await teardown();
    throw e;
  }
}
