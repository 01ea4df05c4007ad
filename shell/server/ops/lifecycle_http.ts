// Spec 004 routes for the fleet (issue 9): GET /v1/capabilities, and the governed
// lifecycle operations POST /v1/models/load (+ GET /v1/models/load/{taskId}),
// POST /v1/models/unload, POST /v1/cache/flush. Each POST checks its
// verifiedOpToken (op_token.ts) before anything reaches the core, registers the
// caller under a fresh task id (ids.ts) and submits a lifecycleRequested event;
// the core decides when and what to answer and says so in a replyLifecycle
// effect, which run_effects.ts writes like any other.
import type { HttpRequest, HttpResponse } from "../door/exchange.ts";
import {
  apiError,
  capabilitiesView,
  type ClientError,
  type Event,
  type LifecycleOperation,
  lifecycleTaskView,
  type State,
  taskDocument,
  type WaitStats,
} from "../../../core/mod.ts";
import type { Logger } from "../../log.ts";
import { decodeSegment } from "./admin.ts";
import { readJsonBody } from "../http/body.ts";
import type { LifecycleCallers } from "../http/clients.ts";
import type { CapabilitiesAccess } from "../http/endpoint_access.ts";
import { replyError, sendJson } from "../http/http_reply.ts";
import { newTaskId } from "../ids.ts";
import { checkOpToken, type Governance, OP_TOKEN_FIELDS } from "./op_token.ts";

const BODY_MAX = 64 * 1024;
const FLUSH_SCOPES = ["all", "model", "tenant", "tag"];
const LIFECYCLE_PATHS: Record<string, LifecycleOperation> = {
  "/v1/models/load": "model-load",
  "/v1/models/unload": "model-unload",
  "/v1/cache/flush": "cache-flush",
};

export type LifecycleDeps = {
  state: () => State | null;
  submit: (event: Event) => void;
  /** Monotonic ms (the core's clock). */
  now: () => number;
  /** Wall-clock seconds since the epoch (token issuedAt). */
  wallNowSecs: () => number;
  governance: Governance;
  waits: () => WaitStats;
  /** Where a verified call waits for its replyLifecycle (shared with run_effects.ts). */
  callers: LifecycleCallers;
  /** BODY_TIMEOUT_SECS in ms. */
  bodyTimeoutMs: number;
  log: Logger;
  /** Who may read /v1/capabilities, and whether with per-worker detail. */
  capabilitiesAccess: (req: HttpRequest) => CapabilitiesAccess;
};

export type LifecycleRoutes = {
  handle(req: HttpRequest, res: HttpResponse, url: URL): boolean;
};

/**
 * Views of one state version: a view is a function of the state (and of the
 * queue waits, which change only with the effects of an event), so it is kept
 * exactly as long as `version` and `nowMs` stay where they were. `nowMs` is
 * compared too because cluster mode rebuilds the state from version 0.
 */
export type ViewCache = {
  version: number;
  nowMs: number;
  bodies: Map<string, Record<string, unknown> | null>;
};

export function newViewCache(): ViewCache {
  return { version: -1, nowMs: -1, bodies: new Map() };
}

/** The view under `key` at this state's version, computed at most once per version. */
export function viewAt(
  cache: ViewCache,
  state: State,
  key: string,
  compute: () => Record<string, unknown> | null,
): Record<string, unknown> | null {
  if (cache.version !== state.version || cache.nowMs !== state.nowMs) {
    cache.version = state.version;
    cache.nowMs = state.nowMs;
    cache.bodies.clear();
  }
  if (cache.bodies.has(key)) return cache.bodies.get(key) ?? null;
  const body = compute();
  // Keys are bounded by the workers (`?worker=`); an unknown id is not kept.
  if (body !== null) cache.bodies.set(key, body);
  return body;
}

export function makeLifecycleRoutes(deps: LifecycleDeps): LifecycleRoutes {
  const cache = newViewCache();
  return {
    handle(req, res, url) {
      const path = url.pathname;
      if (path === "/v1/capabilities") {
        req.resume();
        if (req.method !== "GET") {
          replyError(
            res,
            apiError("method_not_allowed", { use: "GET", path }),
          );
        } else capabilities(deps, cache, req, res, url);
        return true;
      }
      if (path.startsWith("/v1/models/load/")) {
        req.resume();
        taskStatus(deps, req, res, path);
        return true;
      }
      const operation = LIFECYCLE_PATHS[path];
      if (operation === undefined) return false;
      if (req.method !== "POST") {
        req.resume();
        replyError(res, apiError("method_not_allowed", { use: "POST", path }));
        return true;
      }
      lifecycleCall(deps, req, res, operation);
      return true;
    },
  };
}

/** GET /v1/capabilities[?worker=id], computed once per state version (`viewAt`). */
function capabilities(
  deps: LifecycleDeps,
  cache: ViewCache,
  req: HttpRequest,
  res: HttpResponse,
  url: URL,
): void {
  const access = deps.capabilitiesAccess(req);
  if (access.kind === "denied") {
    return replyError(res, access.error, access.headers);
  }
  const detail = access.kind === "detail";
  const state = deps.state();
  if (state === null) return replyError(res, apiError("starting"));
  const workerId = url.searchParams.get("worker");
  if (workerId !== null && !detail) {
    return replyError(res, apiError("admin_only"));
  }
  const key = `${detail ? "detail" : "fleet"}:${workerId ?? ""}`;
  const body = viewAt(
    cache,
    state,
    key,
    () => capabilitiesView(state, deps.waits(), workerId, detail),
  );
  if (body === null) {
    return replyError(
      res,
      apiError("worker_not_found", { id: workerId ?? "" }),
    );
  }
  // Current as of its state version; a client asks again for a newer one.
  sendJson(res, 200, body, { "cache-control": "no-cache" });
}

/** GET /v1/models/load/{taskId}: any task's document, load or not. */
function taskStatus(
  deps: LifecycleDeps,
  req: HttpRequest,
  res: HttpResponse,
  path: string,
): void {
  const raw = path.slice("/v1/models/load/".length);
  const id = decodeSegment(raw);
  const state = deps.state();
  const view = state === null || id === null
    ? null
    : lifecycleTaskView(state, id);
  if (req.method !== "GET") {
    replyError(res, apiError("method_not_allowed", { use: "GET", path }));
  } else if (id === null) {
    replyError(res, apiError("invalid_task_id", { raw }));
  } else if (view === null) {
    replyError(res, apiError("task_not_found", { id }));
  } else sendJson(res, 200, taskDocument(view));
}

/** What a POST asks the core for, or the 400 that refuses it. */
type LifecycleAsk =
  | {
    kind: "ask";
    modelId: string | null;
    params: Record<string, unknown>;
    workerId: string | null;
  }
  | { kind: "invalid"; error: ClientError };

function invalid(error: ClientError): LifecycleAsk {
  return { kind: "invalid", error };
}

/** Reads the call from its body: the model, the worker's params, a chosen worker. */
function askOf(
  operation: LifecycleOperation,
  body: Record<string, unknown>,
): LifecycleAsk {
  // The token's own field names cannot be call parameters: they would be
  // indistinguishable from the token's metadata in what is signed.
  const reserved = OP_TOKEN_FIELDS.filter((k) => k !== "modelId" && k in body);
  if (reserved.length > 0) {
    return invalid(apiError("invalid_body", {
      detail: `${
        reserved.join(", ")
      } belong inside verifiedOpToken.opToken, not in the request body`,
    }));
  }
  const params: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body)) {
    if (k !== "workerId") params[k] = v;
  }
  const workerId = typeof body.workerId === "string" ? body.workerId : null;
  if (operation !== "cache-flush") {
    if (typeof body.modelId !== "string" || body.modelId.trim() === "") {
      return invalid(apiError("missing_model_id"));
    }
    return { kind: "ask", modelId: body.modelId, params, workerId };
  }
  const scope = body.scope ?? "all";
  if (typeof scope !== "string" || !FLUSH_SCOPES.includes(scope)) {
    return invalid(apiError("invalid_scope", {
      detail: `"scope" must be one of ${FLUSH_SCOPES.join(", ")}`,
    }));
  }
  const need = { model: "modelId", tenant: "tenantId", tag: "tag" }[
    scope as "model" | "tenant" | "tag"
  ];
  if (
    need !== undefined &&
    (typeof body[need] !== "string" || body[need] === "")
  ) {
    return invalid(apiError("missing_scope_value", { scope, need }));
  }
  const modelId = typeof body.modelId === "string" ? body.modelId : null;
  return { kind: "ask", modelId, params: { ...params, scope }, workerId };
}

/** What the token must sign besides operation and modelId: the rest of the body. */
function signedParams(body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body)) {
    if (k !== "verifiedOpToken" && k !== "modelId") out[k] = v;
  }
  return out;
}

/** POST load, unload or flush: body, call, token; then the core answers the caller. */
function lifecycleCall(
  deps: LifecycleDeps,
  req: HttpRequest,
  res: HttpResponse,
  operation: LifecycleOperation,
): void {
  const limits = {
    maxBytes: BODY_MAX,
    timeoutMs: deps.bodyTimeoutMs,
    emptyIsObject: false,
  };
  readJsonBody(req, res, limits, async (read) => {
    if (read.kind === "notJson") {
      return replyError(
        res,
        apiError("invalid_body", { detail: "request body is not valid JSON" }),
      );
    }
    const body = read.value;
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      return replyError(
        res,
        apiError("invalid_body", {
          detail: "request body must be a JSON object",
        }),
      );
    }
    const fields = body as Record<string, unknown>;
    const ask = askOf(operation, fields);
    if (ask.kind === "invalid") {
      return replyError(res, ask.error);
    }
    const check = await checkOpToken(
      deps.governance,
      fields.verifiedOpToken,
      { operation, modelId: ask.modelId, params: signedParams(fields) },
      deps.wallNowSecs,
    );
    if (check.kind === "refused") {
      const e = check.error;
      if (e.code !== "lifecycle_unconfigured") {
        deps.log("warn", "lifecycle call refused", {
          operation,
          code: e.code,
          model: ask.modelId ?? "",
        });
      }
      return replyError(res, e);
    }
    if (deps.state() === null) {
      return replyError(res, apiError("starting"));
    }
    const taskId = newTaskId(operation);
    deps.log("info", "lifecycle call verified", {
      operation,
      task_id: taskId,
      model: ask.modelId ?? "",
      signers: check.token.signers.join(","),
    });
    deps.callers.set(taskId, res);
    res.once("close", () => {
      if (deps.callers.get(taskId) === res) deps.callers.delete(taskId);
    });
    deps.submit({
      kind: "lifecycleRequested",
      atMs: deps.now(),
      taskId,
      operation,
      modelId: ask.modelId,
      params: ask.params,
      workerId: ask.workerId,
      replyWanted: true,
    });
  }, (e) => replyError(res, e));
}
