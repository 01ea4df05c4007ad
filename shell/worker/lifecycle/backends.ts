// Carries lifecycle operations (model-load, model-unload, cache-flush) to the
// local backend. Which API the backend offers is found by probing, once, and
// again after a failure:
//
//   spec004       GET /v1/capabilities answers a spec 004 document: load, unload
//                 and flush are passed through; a load's task is polled
//                 (GET /v1/models/load/{taskId}) and its progress reported.
//   ollama        GET /api/tags answers: load = POST /api/generate {model,
//                 prompt: "", keep_alive: "5m"} (or params.keepAlive), unload =
//                 the same with keep_alive 0; no cache flush (501).
//   llama-router  llama-server in router mode (GET /models lists models with a
//                 status): POST /models/load and /models/unload {model}; load is
//                 polled through GET /models; no cache flush (501).
//   llama-swap    GET /running answers: load = GET /upstream/{model}/health
//                 (llama-swap starts the model on demand), unload = POST /unload
//                 (llama-swap unloads every model, so only when the requested one
//                 is the only one running, else 501); no cache flush (501).
//   llama-server  a single-model llama-server (GET /props answers with
//                 default_generation_settings and total_slots; issue 14, checked
//                 against the real binary): load of the model it serves is
//                 already done (completed at once), any other load and every
//                 unload 501 (it serves the one model it was started with);
//                 cache flush (scope all, or model = the served one) = POST
//                 /slots/{id}?action=erase for every slot, which llama-server
//                 answers 501 unless started with --slot-save-path.
//   none          anything else: every operation fails with a 501-style message
//                 naming what the backend lacks.
import type {
  LifecycleOperation,
  LifecycleProgressStatus,
} from "../../../core/protocol/mod.ts";
// A load that has not finished in MODEL_LOAD_MS_MAX is reported failed: the
// server's lifecycle task gives up at the same limit. What each poll of a load
// means (done, failed, still running, given up) is the worker core's decision.
import { MODEL_LOAD_MS_MAX } from "../../../core/mod.ts";
import {
  LOAD_POLL_MS,
  routerLoadPoll,
  spec004LoadPoll,
} from "../../../core/worker/mod.ts";

export type BackendKind =
  | "spec004"
  | "ollama"
  | "llama-router"
  | "llama-swap"
  | "llama-server"
  | "none";

export type Report = (u: {
  status: LifecycleProgressStatus;
  progress: number | null;
  error: string | null;
  result: Record<string, unknown> | null;
}) => void;

const PROBE_MS = 3_000;
const CALL_MS = 30_000;

type Json = Record<string, unknown>;

/** fetch with the backend's key added (BACKEND_API_KEY); plain fetch without one. */
export type BackendFetch = typeof fetch;

/** A fetch that sends `Authorization: Bearer <apiKey>` on every call. */
export function keyedFetch(apiKey: string | null): BackendFetch {
  if (apiKey === null) return fetch;
  return (input, init = {}) => {
    const headers = new Headers(init.headers);
    headers.set("authorization", `Bearer ${apiKey}`);
    return fetch(input, { ...init, headers });
  };
}

async function getJson(
  call: BackendFetch,
  url: string,
  ms = PROBE_MS,
): Promise<unknown> {
  const res = await call(url, { signal: AbortSignal.timeout(ms) });
  if (!res.ok) {
    await res.body?.cancel();
    throw new Error(`GET ${new URL(url).pathname} answered ${res.status}`);
  }
  return await res.json();
}

async function postJson(
  call: BackendFetch,
  url: string,
  body: unknown,
  ms = CALL_MS,
): Promise<{ status: number; json: Json }> {
  const res = await call(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(ms),
  });
  const text = await res.text();
  let json: Json = {};
  try {
    const v = JSON.parse(text);
    if (typeof v === "object" && v !== null) json = v as Json;
  } catch {
    json = { text: text.slice(0, 200) };
  }
  return { status: res.status, json };
}

function isObj(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Probes the backend's API; never throws. */
export async function detectBackend(
  base: string,
  call: BackendFetch = fetch,
): Promise<BackendKind> {
  const tries: [BackendKind, string, (v: unknown) => boolean][] = [
    ["spec004", "/v1/capabilities", (v) => isObj(v) && isObj(v.models)],
    ["ollama", "/api/tags", (v) => isObj(v) && Array.isArray(v.models)],
    [
      "llama-router",
      "/models",
      (v) =>
        isObj(v) && Array.isArray(v.data) &&
        v.data.some((m) => isObj(m) && "status" in m),
    ],
    ["llama-swap", "/running", (v) => isObj(v) && Array.isArray(v.running)],
    [
      "llama-server",
      "/props",
      (v) =>
        isObj(v) && isObj(v.default_generation_settings) &&
        typeof v.total_slots === "number",
    ],
  ];
  for (const [kind, path, ok] of tries) {
    try {
      if (ok(await getJson(call, base + path))) return kind;
    } catch {
      // Not this kind.
    }
  }
  return "none";
}

function unsupported(
  report: Report,
  backend: BackendKind,
  operation: LifecycleOperation,
): void {
  const what = backend === "none"
    ? "the backend offers no model lifecycle API (no spec 004 /v1/capabilities, Ollama /api/tags, llama-server /props or router /models, or llama-swap /running)"
    : `the ${backend} backend has no ${operation} operation`;
  report({
    status: "failed",
    progress: null,
    error: `501 not implemented: ${what}`,
    result: { status: 501 },
  });
}

function errorText(status: number, json: Json): string {
  const e = json.error;
  const msg = isObj(e) && typeof e.message === "string"
    ? e.message
    : typeof e === "string"
    ? e
    : JSON.stringify(json).slice(0, 200);
  return `backend answered ${status}: ${msg}`;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

/** Runs one operation to its end, reporting progress; never throws. */
export async function runOperation(
  base: string,
  backend: BackendKind,
  operation: LifecycleOperation,
  params: Json,
  report: Report,
  signal: AbortSignal,
  call: BackendFetch = fetch,
): Promise<void> {
  const fail = (error: string, status = 502) =>
    report({ status: "failed", progress: null, error, result: { status } });
  const ok = (result: Json) =>
    report({ status: "completed", progress: 1, error: null, result });
  const op: Operation = {
    call,
    base,
    operation,
    params,
    modelId: typeof params.modelId === "string" ? params.modelId : "",
    started: Date.now(),
    signal,
    report,
    ok,
    fail,
  };
  try {
    // `return await`: a throw of any of them is caught below.
    switch (backend) {
      case "spec004":
        return await spec004(op);
      case "ollama":
        return await ollama(op);
      case "llama-router":
        return await llamaRouter(op);
      case "llama-swap":
        return await llamaSwap(op);
      case "llama-server":
        return await singleLlama(call, base, operation, params, ok, fail);
      case "none":
        return unsupported(report, backend, operation);
    }
  } catch (e) {
    fail(`backend error: ${(e as Error).message}`);
  }
}

/** One operation under way: where, what, and how its end is reported. */
type Operation = {
  call: BackendFetch;
  base: string;
  operation: LifecycleOperation;
  params: Json;
  /** params.modelId, or "" without one. */
  modelId: string;
  /** Date.now() when it began. */
  started: number;
  signal: AbortSignal;
  report: Report;
  ok: (result: Json) => void;
  fail: (error: string, status?: number) => void;
};

/** A spec 004 backend: see the header. */
async function spec004(o: Operation): Promise<void> {
  const { call, base, operation, ok, fail } = o;
  const path = operation === "model-load"
    ? "/v1/models/load"
    : operation === "model-unload"
    ? "/v1/models/unload"
    : "/v1/cache/flush";
  const r = await postJson(call, base + path, o.params);
  if (r.status >= 400) return fail(errorText(r.status, r.json), r.status);
  if (operation !== "model-load" || r.status !== 202) return ok(r.json);
  const taskId = String(r.json.taskId ?? "");
  while (!o.signal.aborted) {
    await sleep(LOAD_POLL_MS, o.signal);
    const t = await getJson(
      call,
      `${base}/v1/models/load/${encodeURIComponent(taskId)}`,
      CALL_MS,
    ) as Json;
    const poll = spec004LoadPoll(t.status, t.error, Date.now() - o.started);
    if (poll.kind === "loaded") return ok(t);
    if (poll.kind === "failed") return fail(poll.error);
    o.report({
      status: "running",
      progress: typeof t.progress === "number" ? t.progress : null,
      error: null,
      result: typeof t.eta === "number" ? { eta: t.eta } : null,
    });
  }
  return fail("the load did not finish in time");
}

/** Ollama: see the header. */
async function ollama(o: Operation): Promise<void> {
  const { operation, modelId } = o;
  if (operation === "cache-flush") {
    return unsupported(o.report, "ollama", operation);
  }
  const keepAlive = operation === "model-unload"
    ? 0
    : (o.params.keepAlive ?? "5m");
  const r = await postJson(o.call, `${o.base}/api/generate`, {
    model: modelId,
    prompt: "",
    keep_alive: keepAlive,
    stream: false,
  }, MODEL_LOAD_MS_MAX);
  if (r.status >= 400) return o.fail(errorText(r.status, r.json), r.status);
  return o.ok(
    operation === "model-load"
      ? { modelId, loadTimeMs: Date.now() - o.started }
      : { modelId, kvCacheFlushed: true },
  );
}

/** llama-server in router mode: see the header. */
async function llamaRouter(o: Operation): Promise<void> {
  const { call, base, operation, modelId, started, ok, fail } = o;
  if (operation === "cache-flush") {
    return unsupported(o.report, "llama-router", operation);
  }
  const path = operation === "model-load" ? "/models/load" : "/models/unload";
  const r = await postJson(call, base + path, { model: modelId });
  if (r.status >= 400) return fail(errorText(r.status, r.json), r.status);
  if (operation === "model-unload") return ok({ modelId });
  while (!o.signal.aborted) {
    const list = await getJson(call, `${base}/models`, CALL_MS) as Json;
    const m = (list.data as Json[]).find((x) => x.id === modelId);
    const st = isObj(m?.status) ? m.status.value : m?.status;
    const elapsedMs = Date.now() - started;
    const poll = routerLoadPoll(modelId, st, elapsedMs);
    if (poll.kind === "loaded") return ok({ modelId, loadTimeMs: elapsedMs });
    if (poll.kind === "failed") return fail(poll.error);
    o.report({
      status: "running",
      progress: null,
      error: null,
      result: null,
    });
    await sleep(LOAD_POLL_MS, o.signal);
  }
  return fail("the load did not finish in time");
}

/** llama-swap: see the header. */
async function llamaSwap(o: Operation): Promise<void> {
  const { call, base, operation, modelId, ok, fail } = o;
  if (operation === "cache-flush") {
    return unsupported(o.report, "llama-swap", operation);
  }
  if (operation === "model-load") {
    const res = await call(
      `${base}/upstream/${encodeURIComponent(modelId)}/health`,
      { signal: AbortSignal.timeout(MODEL_LOAD_MS_MAX) },
    );
    await res.body?.cancel();
    if (!res.ok) {
      return fail(`llama-swap answered ${res.status}`, res.status);
    }
    return ok({ modelId, loadTimeMs: Date.now() - o.started });
  }
  const running = (await getJson(call, `${base}/running`) as Json)
    .running as Json[];
  const others = running.filter((x) => x.model !== modelId);
  if (others.length > 0) {
    return fail(
      `501 not implemented: llama-swap can only unload every model at once and ${others.length} other model(s) are running`,
      501,
    );
  }
  const r = await postJson(call, `${base}/unload`, {});
  if (r.status >= 400) return fail(errorText(r.status, r.json), r.status);
  return ok({ modelId });
}

/** The ids (and aliases) a single-model llama-server answers to. */
async function servedIds(
  call: BackendFetch,
  base: string,
): Promise<string[]> {
  const list = await getJson(call, `${base}/v1/models`) as Json;
  const data = Array.isArray(list.data) ? list.data as unknown[] : [];
  return [
    ...new Set(
      data.flatMap((m) =>
        isObj(m)
          ? [m.id, ...(Array.isArray(m.aliases) ? m.aliases : [])].filter((
            x,
          ): x is string => typeof x === "string")
          : []
      ),
    ),
  ];
}

/** llama-server started with one model (-m): see the header. */
async function singleLlama(
  call: BackendFetch,
  base: string,
  operation: LifecycleOperation,
  params: Json,
  ok: (result: Json) => void,
  fail: (error: string, status?: number) => void,
): Promise<void> {
  const served = await servedIds(call, base);
  const modelId = typeof params.modelId === "string" ? params.modelId : "";
  const names = served.map((m) => `"${m}"`).join(", ");
  if (operation === "model-load") {
    if (served.includes(modelId)) {
      return ok({ modelId, loadTimeMs: 0, alreadyLoaded: true });
    }
    return fail(
      `501 not implemented: this llama-server serves only ${names} and cannot load "${modelId}" (restart it with another -m, or run it in router mode)`,
      501,
    );
  }
  if (operation === "model-unload") {
    return fail(
      `501 not implemented: a single-model llama-server cannot unload ${names}; stop the process instead (or run it in router mode)`,
      501,
    );
  }
  const scope = params.scope ?? "all";
  if (!(scope === "all" || scope === "model" && served.includes(modelId))) {
    return fail(
      `501 not implemented: llama-server can flush only its whole KV cache (scope all, or model ${names}), not scope ${
        JSON.stringify(scope)
      }${scope === "model" ? ` "${modelId}"` : ""}`,
      501,
    );
  }
  const slots = await getJson(call, `${base}/slots`, CALL_MS);
  if (!Array.isArray(slots)) return fail("GET /slots answered no list");
  let erased = 0;
  for (const slot of slots) {
    const id = isObj(slot) && typeof slot.id === "number" ? slot.id : null;
    if (id === null) continue;
    const r = await postJson(call, `${base}/slots/${id}?action=erase`, {});
    if (r.status >= 400) return fail(errorText(r.status, r.json), r.status);
    if (typeof r.json.n_erased === "number") erased += r.json.n_erased;
  }
  ok({ flushed: true, entriesRemoved: erased, slots: slots.length });
}
