// A mock model runner implementing spec 004 on top of the mock backend, for
// tests and the demo:
//
//   GET  /v1/capabilities            the spec document (models loaded, loading
//                                    with progress, available; resources; queue)
//   POST /v1/models/load {modelId}   202 {taskId, status, progress, eta}; the load
//                                    advances in `loadSteps` steps of `stepMs`
//   GET  /v1/models/load/{taskId}    the task; 200 {status: "completed", ...} at the end
//   POST /v1/models/unload {modelId} 200 {modelId, gpuMemoryFreedMB, kvCacheFlushed}
//   POST /v1/cache/flush {scope...}  200 {flushed, entriesRemoved, memoryFreedMB}
//   GET  /v1/models, /health         loaded models only
//   inference routes                 proxied to the mock backend when the model
//                                    is loaded (else 404), with X-Cache-Hit,
//                                    X-Cache-Tokens-Reused and X-GPU-Time-Ms
//
// A request is a cache hit when its X-Cache-Tag (or, without one, its body) was
// seen before for that model; tokens reused = body length / 4 then.
import { type MockBackend, startMockBackend } from "./backend.ts";
import { json } from "./respond.ts";

export type MockRunnerOptions = {
  port?: number;
  /** Loaded at start. */
  loaded?: string[];
  /** Loadable on request (loaded ones need not be listed). */
  available?: string[];
  loadSteps?: number;
  stepMs?: number;
  chunkDelayMs?: number;
  /** MB each loaded model takes. */
  modelMemoryMB?: number;
};

export type MockRunnerStats = {
  loads: number;
  unloads: number;
  flushes: number;
  /** Every lifecycle POST seen (load, unload, flush), whatever its outcome. */
  lifecycleCalls: number;
  inference: number;
  lastLifecycleBody: Record<string, unknown> | null;
};

type Task = {
  taskId: string;
  modelId: string;
  status: "loading" | "completed" | "failed";
  progress: number;
  startedAtMs: number;
  loadTimeMs?: number;
};

export type MockRunner = {
  url: string;
  port: number;
  backend: MockBackend;
  stats: MockRunnerStats;
  loaded(): string[];
  close(): Promise<void>;
};

const GPU_TOTAL_MB = 81920;

function err(status: number, code: string, message: string): Response {
  return json(status, { error: { message, type: code, code } });
}

export async function startMockRunner(
  opts: MockRunnerOptions = {},
): Promise<MockRunner> {
  const loaded = new Map<string, number>(); // model -> loadedAt (unix s)
  for (const m of opts.loaded ?? []) {
    loaded.set(m, Math.floor(Date.now() / 1000));
  }
  const available = new Set(opts.available ?? []);
  const steps = opts.loadSteps ?? 4;
  const stepMs = opts.stepMs ?? 50;
  const memMB = opts.modelMemoryMB ?? 8000;
  const tasks = new Map<string, Task>();
  const timers = new Set<ReturnType<typeof setTimeout>>();
  const cache = new Map<string, Set<string>>(); // model -> cache keys seen
  let nextTask = 1;
  const stats: MockRunnerStats = {
    loads: 0,
    unloads: 0,
    flushes: 0,
    lifecycleCalls: 0,
    inference: 0,
    lastLifecycleBody: null,
  };
  const backend = await startMockBackend({
    models: [...loaded.keys()],
    chunkDelayMs: opts.chunkDelayMs ?? 5,
  });
  const sync = () => backend.setModels([...loaded.keys()]);

  function capabilities() {
    const used = loaded.size * memMB;
    let entries = 0;
    for (const s of cache.values()) entries += s.size;
    return {
      runnerType: "mock-runner-1.0",
      runnerId: `mock-runner-${backend.port}`,
      models: {
        loaded: [...loaded].map(([id, at]) => ({
          id,
          quantization: "fp16",
          contextLength: 8192,
          loadedAt: at,
          gpuMemoryMB: memMB,
        })),
        loading: [...tasks.values()].filter((t) => t.status === "loading").map(
          (t) => ({
            id: t.modelId,
            progress: t.progress,
            eta: Math.ceil((1 - t.progress) * steps * stepMs / 1000),
          }),
        ),
        available: [...available].filter((m) => !loaded.has(m)),
      },
      resources: {
        gpuIds: [0],
        gpuMemoryTotalMB: GPU_TOTAL_MB,
        gpuMemoryUsedMB: used,
        gpuMemoryFreeMB: GPU_TOTAL_MB - used,
        gpuUtilization: 0.1,
        kvCacheSizeMB: 1000,
        kvCacheUtilization: Math.min(1, entries / 100),
      },
      queue: { depth: 0, maxDepth: 16, avgWaitMs: 0, p95WaitMs: 0 },
      capabilities: {
        streaming: true,
        prefixCaching: true,
        multiTenant: true,
        visionInput: false,
        audioInput: false,
        functionCalling: false,
      },
      health: "healthy",
    };
  }

  function load(modelId: string): Response {
    if (!available.has(modelId) && !loaded.has(modelId)) {
      return err(404, "model_not_found", `model "${modelId}" is not available`);
    }
    stats.loads++;
    const task: Task = {
      taskId: `load-${nextTask++}`,
      modelId,
      status: "loading",
      progress: 0,
      startedAtMs: Date.now(),
    };
    tasks.set(task.taskId, task);
    let done = 0;
    const advance = () => {
      done++;
      task.progress = done / steps;
      if (done >= steps) {
        task.status = "completed";
        task.progress = 1;
        task.loadTimeMs = Date.now() - task.startedAtMs;
        loaded.set(modelId, Math.floor(Date.now() / 1000));
        sync();
        return;
      }
      const t = setTimeout(() => {
        timers.delete(t);
        advance();
      }, stepMs);
      timers.add(t);
    };
    const t = setTimeout(() => {
      timers.delete(t);
      advance();
    }, stepMs);
    timers.add(t);
    return json(202, {
      taskId: task.taskId,
      status: "loading",
      progress: 0,
      eta: Math.ceil(steps * stepMs / 1000),
    });
  }

  function taskDoc(t: Task) {
    return {
      taskId: t.taskId,
      status: t.status,
      modelId: t.modelId,
      progress: t.progress,
      ...(t.status === "completed"
        ? { gpuMemoryUsedMB: memMB, loadTimeMs: t.loadTimeMs }
        : { eta: Math.ceil((1 - t.progress) * steps * stepMs / 1000) }),
    };
  }

  async function inference(req: Request, path: string): Promise<Response> {
    stats.inference++;
    const body = await req.text();
    let model = "";
    try {
      model = String(JSON.parse(body).model ?? "");
    } catch {
      // The backend answers the bad body.
    }
    if (!loaded.has(model)) {
      return err(404, "model_not_loaded", `model "${model}" is not loaded`);
    }
    const started = performance.now();
    const key = req.headers.get("x-cache-tag") ?? body;
    const seen = cache.get(model) ?? new Set<string>();
    cache.set(model, seen);
    const hit = req.headers.get("x-cache-mode") !== "none" && seen.has(key);
    seen.add(key);
    const headers = new Headers(req.headers);
    headers.delete("host");
    headers.delete("content-length");
    const upstream = await fetch(backend.url + path, {
      method: "POST",
      headers,
      body,
    });
    const out = new Headers(upstream.headers);
    out.set("x-cache-hit", String(hit));
    out.set(
      "x-cache-tokens-reused",
      String(hit ? Math.ceil(body.length / 4) : 0),
    );
    out.set(
      "x-gpu-time-ms",
      String(Math.max(1, Math.round(performance.now() - started))),
    );
    return new Response(upstream.body, {
      status: upstream.status,
      headers: out,
    });
  }

  async function lifecycle(req: Request, path: string): Promise<Response> {
    stats.lifecycleCalls++;
    let body: Record<string, unknown>;
    try {
      body = await req.json();
    } catch {
      return err(400, "invalid_json", "request body is not JSON");
    }
    stats.lastLifecycleBody = body;
    const modelId = typeof body.modelId === "string" ? body.modelId : "";
    if (path === "/v1/models/load") return load(modelId);
    if (path === "/v1/models/unload") {
      if (!loaded.delete(modelId)) {
        return err(404, "model_not_loaded", `model "${modelId}" is not loaded`);
      }
      stats.unloads++;
      cache.delete(modelId);
      available.add(modelId);
      sync();
      return json(200, {
        modelId,
        gpuMemoryFreedMB: memMB,
        kvCacheFlushed: true,
      });
    }
    stats.flushes++;
    let removed = 0;
    for (const [m, s] of cache) {
      if (body.scope === "model" && m !== modelId) continue;
      removed += s.size;
      s.clear();
    }
    return json(200, {
      flushed: true,
      entriesRemoved: removed,
      memoryFreedMB: removed,
    });
  }

  const INFERENCE = new Set([
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/responses",
    "/v1/messages",
  ]);
  const LIFECYCLE = new Set([
    "/v1/models/load",
    "/v1/models/unload",
    "/v1/cache/flush",
  ]);

  return await new Promise((resolve) => {
    const server = Deno.serve({
      port: opts.port ?? 0,
      hostname: "127.0.0.1",
      onListen(addr) {
        resolve({
          url: `http://127.0.0.1:${addr.port}`,
          port: addr.port,
          backend,
          stats,
          loaded: () => [...loaded.keys()],
          async close() {
            for (const t of timers) clearTimeout(t);
            timers.clear();
            await server.shutdown();
            await backend.close();
          },
        });
      },
    }, (req) => {
      const path = new URL(req.url).pathname;
      if (req.method === "POST" && INFERENCE.has(path)) {
        return inference(req, path);
      }
      if (req.method === "POST" && LIFECYCLE.has(path)) {
        return lifecycle(req, path);
      }
      if (req.method === "GET" && path === "/v1/capabilities") {
        return json(200, capabilities(), { "cache-control": "max-age=5" });
      }
      if (req.method === "GET" && path.startsWith("/v1/models/load/")) {
        const t = tasks.get(path.slice("/v1/models/load/".length));
        return t === undefined
          ? err(404, "task_not_found", "no such task")
          : json(200, taskDoc(t));
      }
      if (req.method === "GET" && path === "/v1/models") {
        return json(200, {
          object: "list",
          data: [...loaded.keys()].map((id) => ({
            id,
            object: "model",
            created: 0,
            owned_by: "mock-runner",
          })),
        });
      }
      if (req.method === "GET" && path === "/health") {
        return json(200, {
          status: "healthy",
          uptime: 0,
          modelsLoaded: loaded.size,
          queueDepth: 0,
        });
      }
      return err(404, "not_found", `no route for ${req.method} ${path}`);
    });
  });
}
