// Fake swapping backends (issue 30): a box that lists more models than it can
// hold and loads one on the first request for it, the way Ollama and
// llama-swap do. Each speaks its own dialect, so the worker's lifecycle
// adapter (shell/worker/lifecycle/) detects and reads it as the real one:
//
//   both       GET /v1/models        every model it can serve (loaded or not)
//              POST /v1/chat/completions, /v1/completions   OpenAI shapes,
//                                    /v1/messages Anthropic's (mock/formats.ts),
//                                    after the model is resident
//   ollama     GET /api/tags         every model {name, model, size, ...}
//              GET /api/ps           resident models {name, model, size,
//                                    size_vram, expires_at, context_length, ...}
//              POST /api/chat        NDJSON stream (default) or one object
//              POST /api/generate    {prompt: ""} loads only; keep_alive 0
//                                    unloads (how Ollama's own CLI does both)
//   llama-swap GET /running          {running: [{model, state: "ready"}]}
//              GET /upstream/{m}/health  loads m, then "OK"
//              POST /unload          unloads every model, "OK"
//              GET /health           "OK"
//
// Shapes checked against Ollama's API reference (/api/ps, /api/tags) and
// llama-swap's proxymanager (listRunningProcessesHandler, unloadAllModelsHandler).
//
// Room: `room` models resident at once (default 1). A request for a model
// that is not resident waits for any swap under way, then swaps: the least
// recently used resident model stops taking new requests, its requests in
// flight finish, it is unloaded, and the new one loads for `loadDelayMs`.
// `stats.loads` counts loads; it is what the issue-30 tests read.
import { type Answer, type Api, jsonBody, streamEvents } from "./formats.ts";
import { answerTo, json, sleep } from "./respond.ts";

export type SwappingDialect = "ollama" | "llama-swap";

export type SwappingBackendOptions = {
  dialect: SwappingDialect;
  /** Every model it can serve. */
  models: string[];
  /** Resident at start (at most `room`); default none. */
  loaded?: string[];
  /** Models resident at once; default 1. */
  room?: number;
  /** How long a load takes; default 200 ms. */
  loadDelayMs?: number;
  /** Delay before each streamed word; default 5 ms. */
  chunkDelayMs?: number;
  answer?: string;
  port?: number;
};

export type SwappingStats = {
  /** Loads finished, all models. */
  loads: number;
  /** Loads finished, per model. */
  loadsByModel: Record<string, number>;
  unloads: number;
  /** Inference requests seen. */
  requests: number;
};

export type SwappingBackend = {
  url: string;
  port: number;
  dialect: SwappingDialect;
  stats: SwappingStats;
  /** Resident models, least recently used first. */
  resident(): string[];
  /** The model loading now, or null. */
  loading(): string | null;
  /** Requests being answered now, all models. */
  inFlight(): number;
  close(): Promise<void>;
};

type Slot = { inFlight: number; lastUsedMs: number; leaving: boolean };

type Box = {
  opts: Required<Omit<SwappingBackendOptions, "port" | "loaded" | "answer">>;
  words: string[];
  resident: Map<string, Slot>;
  loadingModel: string | null;
  swap: Promise<void> | null;
  /** Woken when a model's last request in flight ends. */
  idleWaiters: (() => void)[];
  stats: SwappingStats;
  closing: AbortController;
  nextId: number;
};

const DEFAULT_ANSWER = "Swapped in and answering every word in order.";

/** The inference routes both dialects answer (Ollama's and llama-swap's OpenAI routes, and /v1/messages as recent Ollama does). */
const INFERENCE: Record<string, Api> = {
  "/v1/chat/completions": "chat",
  "/v1/completions": "completions",
  "/v1/messages": "messages",
};
const MODEL_BYTES = 4_000_000_000;

export function startSwappingBackend(
  options: SwappingBackendOptions,
): Promise<SwappingBackend> {
  const box: Box = {
    opts: {
      dialect: options.dialect,
      models: options.models,
      room: options.room ?? 1,
      loadDelayMs: options.loadDelayMs ?? 200,
      chunkDelayMs: options.chunkDelayMs ?? 5,
    },
    words: (options.answer ?? DEFAULT_ANSWER).match(/\S+\s*/g) ?? ["ok"],
    resident: new Map(),
    loadingModel: null,
    swap: null,
    idleWaiters: [],
    stats: { loads: 0, loadsByModel: {}, unloads: 0, requests: 0 },
    closing: new AbortController(),
    nextId: 1,
  };
  for (const m of (options.loaded ?? []).slice(0, box.opts.room)) {
    box.resident.set(m, {
      inFlight: 0,
      lastUsedMs: Date.now(),
      leaving: false,
    });
  }
  return new Promise((resolve) => {
    const server = Deno.serve({
      port: options.port ?? 0,
      hostname: "127.0.0.1",
      onListen(addr) {
        resolve({
          url: `http://${addr.hostname}:${addr.port}`,
          port: addr.port,
          dialect: box.opts.dialect,
          stats: box.stats,
          resident: () => residentModels(box),
          loading: () => box.loadingModel,
          inFlight: () =>
            [...box.resident.values()].reduce((n, s) => n + s.inFlight, 0),
          async close() {
            box.closing.abort();
            for (const wake of box.idleWaiters.splice(0)) wake();
            await server.shutdown();
          },
        });
      },
    }, (req) => handle(box, req));
  });
}

function residentModels(box: Box): string[] {
  return [...box.resident].sort((a, b) => a[1].lastUsedMs - b[1].lastUsedMs)
    .map(([m]) => m);
}

// ---- residency -------------------------------------------------------------------

/** Resolves once `model` is resident and counts one request in flight on it. */
async function acquire(box: Box, model: string): Promise<void> {
  for (;;) {
    if (box.closing.signal.aborted) throw new Error("closing");
    const slot = box.resident.get(model);
    if (slot !== undefined && !slot.leaving) {
      slot.inFlight++;
      slot.lastUsedMs = Date.now();
      return;
    }
    if (box.swap === null) {
      box.swap = swapIn(box, model).finally(() => {
        box.swap = null;
      });
    }
    await box.swap;
  }
}

function release(box: Box, model: string): void {
  const slot = box.resident.get(model);
  if (slot === undefined) return;
  slot.inFlight--;
  slot.lastUsedMs = Date.now();
  if (slot.inFlight === 0) {
    for (const wake of box.idleWaiters.splice(0)) wake();
  }
}

/** Makes room (the least recently used model leaves once idle), then loads `model`. */
async function swapIn(box: Box, model: string): Promise<void> {
  if (box.resident.size >= box.opts.room) {
    const victim = residentModels(box)[0]!;
    const slot = box.resident.get(victim)!;
    slot.leaving = true;
    while (slot.inFlight > 0 && !box.closing.signal.aborted) {
      await new Promise<void>((wake) => box.idleWaiters.push(wake));
    }
    unload(box, victim);
  }
  box.loadingModel = model;
  try {
    if (!(await sleep(box.opts.loadDelayMs, box.closing.signal))) return;
    box.resident.set(model, {
      inFlight: 0,
      lastUsedMs: Date.now(),
      leaving: false,
    });
    box.stats.loads++;
    box.stats.loadsByModel[model] = (box.stats.loadsByModel[model] ?? 0) + 1;
  } finally {
    box.loadingModel = null;
  }
}

function unload(box: Box, model: string): void {
  if (box.resident.delete(model)) box.stats.unloads++;
}

/** Loads `model` if it is not resident (a load-only call: Ollama's empty prompt, llama-swap's upstream health). */
async function loadOnly(box: Box, model: string): Promise<void> {
  await acquire(box, model);
  release(box, model);
}

// ---- HTTP ------------------------------------------------------------------------

async function handle(box: Box, req: Request): Promise<Response> {
  const url = new URL(req.url);
  const path = url.pathname;
  const get = req.method === "GET";
  if (get && path === "/v1/models") {
    return json(200, {
      object: "list",
      data: box.opts.models.map((id) => ({
        id,
        object: "model",
        created: 0,
        owned_by: box.opts.dialect,
      })),
    });
  }
  const api = INFERENCE[path];
  if (!get && api !== undefined) return await inference(box, req, api);
  return box.opts.dialect === "ollama"
    ? await ollamaRoute(box, req, path)
    : await llamaSwapRoute(box, req, path);
}

async function ollamaRoute(
  box: Box,
  req: Request,
  path: string,
): Promise<Response> {
  if (req.method === "GET" && path === "/api/tags") {
    return json(200, {
      models: box.opts.models.map((m) => ({
        ...ollamaModel(m),
        modified_at: new Date(0).toISOString(),
      })),
    });
  }
  if (req.method === "GET" && path === "/api/ps") {
    const expires = new Date(Date.now() + 5 * 60_000).toISOString();
    return json(200, {
      models: residentModels(box).map((m) => ({
        ...ollamaModel(m),
        expires_at: expires,
        size_vram: MODEL_BYTES,
        context_length: 4096,
      })),
    });
  }
  if (req.method === "POST" && path === "/api/generate") {
    const body = await bodyJson(req);
    const model = String(body.model ?? "");
    if (!box.opts.models.includes(model)) return ollamaNotFound(model);
    if (body.keep_alive === 0 || body.keep_alive === "0") {
      unload(box, model);
      return json(200, {
        ...ollamaDone(model),
        done_reason: "unload",
        response: "",
      });
    }
    await loadOnly(box, model);
    return json(200, {
      ...ollamaDone(model),
      done_reason: "load",
      response: "",
    });
  }
  if (req.method === "POST" && path === "/api/chat") {
    return await ollamaChat(box, req);
  }
  return notFound(req, path);
}

async function llamaSwapRoute(
  box: Box,
  req: Request,
  path: string,
): Promise<Response> {
  if (req.method === "GET" && path === "/running") {
    return json(200, {
      running: residentModels(box).map((model) => ({ model, state: "ready" })),
    });
  }
  if (req.method === "GET" && path === "/health") return text(200, "OK");
  if (req.method === "POST" && path === "/unload") {
    for (const m of residentModels(box)) unload(box, m);
    return text(200, "OK");
  }
  const upstream = /^\/upstream\/([^/]+)\/health$/.exec(path);
  if (req.method === "GET" && upstream !== null) {
    const model = decodeURIComponent(upstream[1]!);
    if (!box.opts.models.includes(model)) {
      return text(404, `model ${model} not found`);
    }
    await loadOnly(box, model);
    return text(200, "OK");
  }
  return notFound(req, path);
}

async function inference(
  box: Box,
  req: Request,
  api: Api,
): Promise<Response> {
  box.stats.requests++;
  const body = await bodyJson(req);
  const model = String(body.model ?? "");
  if (!box.opts.models.includes(model)) {
    return json(404, {
      error: {
        message: `model "${model}" not found`,
        type: "not_found_error",
      },
    });
  }
  await acquire(box, model);
  const answer = buildAnswer(box, body, model);
  if (body.stream !== true) {
    await sleep(
      box.opts.chunkDelayMs * answer.words.length,
      box.closing.signal,
    );
    release(box, model);
    return json(200, jsonBody(api, answer));
  }
  const events = streamEvents(api, answer);
  return stream(box, model, [
    ...events.head,
    ...events.perWord.map((e) => ({ delayed: e })),
    ...events.tail,
  ], "text/event-stream");
}

async function ollamaChat(box: Box, req: Request): Promise<Response> {
  box.stats.requests++;
  const body = await bodyJson(req);
  const model = String(body.model ?? "");
  if (!box.opts.models.includes(model)) return ollamaNotFound(model);
  await acquire(box, model);
  const answer = buildAnswer(box, body, model);
  const created = new Date().toISOString();
  const line = (content: string) =>
    JSON.stringify({
      model,
      created_at: created,
      message: { role: "assistant", content },
      done: false,
    }) + "\n";
  const last = {
    ...ollamaDone(model),
    message: { role: "assistant", content: "" },
    done_reason: "stop",
    prompt_eval_count: answer.promptTokens,
    eval_count: answer.words.length,
  };
  // Ollama streams unless the body says `"stream": false`.
  if (body.stream === false) {
    await sleep(
      box.opts.chunkDelayMs * answer.words.length,
      box.closing.signal,
    );
    release(box, model);
    return json(200, {
      ...last,
      message: { role: "assistant", content: answer.words.join("") },
    });
  }
  return stream(box, model, [
    ...answer.words.map((w) => ({ delayed: line(w) })),
    JSON.stringify(last) + "\n",
  ], "application/x-ndjson");
}

/** Writes `parts` (delayed ones after the chunk delay) and releases the model at the end or when the client leaves. */
function stream(
  box: Box,
  model: string,
  parts: (string | { delayed: string })[],
  contentType: string,
): Response {
  const encoder = new TextEncoder();
  const stop = new AbortController();
  const aborted = AbortSignal.any([box.closing.signal, stop.signal]);
  let released = false;
  const done = () => {
    if (released) return;
    released = true;
    release(box, model);
  };
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      try {
        for (const p of parts) {
          if (typeof p !== "string") {
            if (!(await sleep(box.opts.chunkDelayMs, aborted))) return;
          }
          if (aborted.aborted) return;
          controller.enqueue(
            encoder.encode(typeof p === "string" ? p : p.delayed),
          );
        }
        controller.close();
      } catch {
        // The reader cancelled.
      } finally {
        done();
      }
    },
    cancel() {
      stop.abort();
      done();
    },
  });
  return new Response(body, {
    headers: { "content-type": contentType, "cache-control": "no-cache" },
  });
}

// ---- shapes ----------------------------------------------------------------------

function ollamaModel(name: string) {
  return {
    name,
    model: name,
    size: MODEL_BYTES,
    digest: Array.from(name).map((c) => c.charCodeAt(0).toString(16)).join("")
      .padEnd(64, "0").slice(0, 64),
    details: {
      parent_model: "",
      format: "gguf",
      family: "llama",
      families: ["llama"],
      parameter_size: "7B",
      quantization_level: "Q4_K_M",
    },
  };
}

function ollamaDone(model: string) {
  return {
    model,
    created_at: new Date().toISOString(),
    done: true,
    total_duration: 0,
    load_duration: 0,
  };
}

function ollamaNotFound(model: string): Response {
  return json(404, { error: `model '${model}' not found` });
}

function buildAnswer(
  box: Box,
  body: Record<string, unknown>,
  model: string,
): Answer {
  const limit = [body.max_tokens, body.max_completion_tokens].find((v) =>
    typeof v === "number" && Number.isInteger(v) && v >= 0
  ) as number | undefined;
  const count = limit ?? box.words.length;
  const words: string[] = [];
  for (let i = 0; i < count; i++) words.push(box.words[i % box.words.length]!);
  return answerTo(body, {
    id: `swap-${box.nextId++}`,
    model,
    words,
    promptTokens: Math.max(
      1,
      JSON.stringify(body.messages ?? body.prompt ?? "").split(/\s+/).length,
    ),
  });
}

async function bodyJson(req: Request): Promise<Record<string, unknown>> {
  try {
    const v: unknown = JSON.parse(await req.text());
    return typeof v === "object" && v !== null && !Array.isArray(v)
      ? v as Record<string, unknown>
      : {};
  } catch {
    return {};
  }
}

function notFound(req: Request, path: string): Response {
  return json(404, {
    error: { message: `no route ${req.method} ${path}`, type: "not_found" },
  });
}

function text(status: number, value: string): Response {
  return new Response(value, {
    status,
    headers: { "content-type": "text/plain; charset=utf-8" },
  });
}
