// Client HTTP routes (C17): body limits and validation here, everything else in
// the core. Requests come from the door (door/door.ts), which notices a client
// that disconnects before any response byte, split writes included (C46), as
// Deno.serve 2.9.6 does not.
import type { HttpRequest, HttpResponse } from "../door/exchange.ts";
import type {
  ClientApi,
  ClientError,
  ClusterHealth,
  Event,
  KeyRef,
  State,
} from "../../../core/mod.ts";
import {
  aliasTarget,
  apiError,
  errorShapeOf,
  healthAnswer,
  modelById,
  modelList,
  tokenAskOf,
  VERSION,
} from "../../../core/mod.ts";
import { isUtf8 } from "node:buffer";
import {
  findModel,
  type FoundModel,
  multipartBoundary,
  renameModel,
} from "./model_of.ts";
import { readBody } from "./body.ts";
import type { Clients } from "./clients.ts";
import { applyCors } from "./cors.ts";
import { errorBody, errorHeaders } from "./errors.ts";
import { replyError, requestUrl, sendJson } from "./http_reply.ts";
import { newRequestId } from "../ids.ts";
import { type KeyGrant, readTenancy } from "./tenancy.ts";

const INFERENCE_ROUTES: Record<string, ClientApi> = {
  "/v1/chat/completions": "openai",
  "/v1/completions": "openai",
  "/v1/responses": "openai",
  "/v1/messages": "anthropic",
};

export type HttpDeps = {
  state: State;
  clients: Clients;
  submit: (event: Event) => void;
  now: () => number;
  maxBodyBytes: number;
  /** BODY_TIMEOUT_SECS: the whole body must arrive within this. */
  bodyTimeoutMs: number;
  startedAtMs: number;
  /** Extra routes (admin, metrics, pages); returns true when it handled the request. */
  extraRoutes?: (
    req: HttpRequest,
    res: HttpResponse,
    url: URL,
  ) => boolean;
  /** CORS_ALLOW_ORIGINS for /v1/*; absent = no CORS headers. */
  corsAllowOrigins?: readonly string[];
  /** Issue 26: sets the request's traceparent in `headers` (tracing.ts); absent = none. */
  trace?: (requestId: string, headers: Record<string, string>) => void;
  /** Client auth for inference routes; absent = everyone, as claimed. */
  authorize?: (req: HttpRequest, api: ClientApi) => Access;
  /** Cluster mode: this instance's view of the shared log, for /health. */
  clusterHealth?: () => ClusterHealth;
  /** FORWARD_PATH_PREFIXES: paths outside /v1/ forwarded to workers (issue 25); absent = none. */
  forwardPathPrefixes?: readonly string[];
};

/**
 * The relay's own routes, never forwarded to a worker whatever the settings
 * (issue 25): exact paths, and whole subtrees.
 */
const RELAY_PATHS: ReadonlySet<string> = new Set([
  "/health",
  "/metrics",
  "/v1/models",
  "/v1/worker/connect",
  "/v1/capabilities",
  "/v1/models/load",
  "/v1/models/unload",
  "/v1/cache/flush",
  "/dashboard",
  "/dashboard.js",
  "/setup",
  "/setup.js",
  "/ui.css",
]);
const RELAY_SUBTREES: readonly string[] = [
  "/admin",
  "/v1/models/load/",
  "/setup/",
  "/metrics/",
  "/health/",
];

/**
 * Whether a path the relay does not answer itself goes to a worker (issue 25).
 * An operator's prefix matches whole segments (issue 33): `/tokenize` takes
 * `/tokenize` and `/tokenize/…`, not `/tokenizeX`.
 */
export function isForwarded(
  path: string,
  extraPrefixes: readonly string[],
): boolean {
  if (RELAY_PATHS.has(path) || RELAY_SUBTREES.some((p) => path.startsWith(p))) {
    return false;
  }
  return path.startsWith("/v1/") ||
    extraPrefixes.some((p) =>
      path === p || path.startsWith(p.endsWith("/") ? p : `${p}/`)
    );
}

/**
 * Why a forwarded request target is refused (issue 33), or null. The relay
 * forwards the path as the client spelled it; a proxy or server behind the
 * worker that decodes `%2F` or `%5C`, turns `\` into `/` or resolves dot
 * segments would take `/v1/..%2fslots` to `/slots`, outside what the relay
 * lets through. So a forwarded path with any of these is refused, whatever
 * the backend would make of it.
 */
export function forwardedPathRefusal(rawTarget: string): string | null {
  const end = rawTarget.search(/[?#]/);
  const path = end === -1 ? rawTarget : rawTarget.slice(0, end);
  if (path.includes("\\")) return "a backslash";
  if (/%(2f|5c)/i.test(path)) return "an encoded / or \\";
  for (const segment of path.split("/")) {
    const s = segment.replace(/%2e/gi, ".");
    if (s === "." || s === "..") return "a dot segment";
  }
  return null;
}

/** The error shape of a forwarded path: Anthropic's under /v1/messages, else OpenAI's. */
function apiOf(path: string): ClientApi {
  return errorShapeOf(path);
}

/** A client's access: refused with an error, or let in with what its key allows (null: no key needed). */
export type Access =
  | { kind: "denied"; error: ClientError }
  | {
    kind: "granted";
    grant: KeyGrant | null;
    /** The key, named in usage records and limited by its own limits (issue 26). */
    key?: KeyRef | null;
  };

function sendError(
  res: HttpResponse,
  api: ClientApi,
  error: ClientError,
): void {
  res.writeHead(error.status, errorHeaders(error));
  res.end(errorBody(api, error));
}

function traced(
  deps: HttpDeps,
  requestId: string,
  headers: Record<string, string>,
): Record<string, string> {
  deps.trace?.(requestId, headers);
  return headers;
}

export function handleHttp(
  req: HttpRequest,
  res: HttpResponse,
  deps: HttpDeps,
): void {
  // An inference route spelled exactly is its own pathname: no URL parse on
  // the hot path (issue 10). Anything else (a query, dot segments, escapes) is
  // parsed as before.
  const raw = req.url ?? "/";
  const exact = Object.hasOwn(INFERENCE_ROUTES, raw);
  const url = exact ? null : requestUrl(raw);
  if (!exact && url === null) {
    return sendError(
      res,
      "openai",
      apiError("bad_request", { what: "request target" }),
    );
  }
  const path = url === null ? raw : url.pathname;
  if (
    deps.corsAllowOrigins !== undefined && path.startsWith("/v1/") &&
    path !== "/v1/worker/connect" && applyCors(req, res, deps.corsAllowOrigins)
  ) return;
  const api = INFERENCE_ROUTES[path];
  if (api !== undefined) {
    if (req.method !== "POST") {
      res.setHeader("allow", "POST");
      return sendError(
        res,
        api,
        apiError("method_not_allowed", { use: "POST", path }),
      );
    }
    return handleInference(req, res, deps, api, path, false);
  }
  if (req.method === "GET" && path === "/health") return health(res, deps);
  if (req.method === "GET" && path === "/v1/models") {
    if (modelsDenied(req, res, deps)) return;
    return sendJson(res, 200, modelList(deps.state));
  }
  if (path === "/v1/worker/connect") {
    res.setHeader("upgrade", "websocket");
    return replyError(res, apiError("upgrade_required"));
  }
  if (
    deps.extraRoutes?.(req, res, url ?? requestUrl(raw)!) === true
  ) return;
  // Issue 25: GET /v1/models/{id} from the live workers, then every other
  // /v1/ path (and the operator's FORWARD_PATH_PREFIXES) to a worker.
  if (req.method === "GET" && path.startsWith("/v1/models/")) {
    if (modelsDenied(req, res, deps)) return;
    return retrieveModel(res, deps, path);
  }
  if (isForwarded(path, deps.forwardPathPrefixes ?? [])) {
    const why = forwardedPathRefusal(raw);
    if (why !== null) {
      req.resume();
      return sendError(
        res,
        apiOf(path),
        apiError("invalid_path", { why }),
      );
    }
    const u = url ?? requestUrl(raw)!;
    return handleInference(
      req,
      res,
      deps,
      apiOf(path),
      u.pathname + u.search,
      true,
    );
  }
  sendError(
    res,
    "openai",
    apiError("not_found", { method: req.method ?? "GET", path }),
  );
}

/**
 * Issue 24: with keys required the model routes (the list, and one model,
 * issue 25) want a client key too (the SDKs send theirs on models.list and
 * models.retrieve); either header, as on /v1/messages. True when refused.
 */
function modelsDenied(
  req: HttpRequest,
  res: HttpResponse,
  deps: HttpDeps,
): boolean {
  const access = deps.authorize?.(req, "anthropic");
  if (access?.kind !== "denied") return false;
  req.resume();
  sendError(res, "openai", access.error);
  return true;
}

/** GET /v1/models/{id}: the OpenAI model object, or 404 in the OpenAI error shape. */
function retrieveModel(
  res: HttpResponse,
  deps: HttpDeps,
  path: string,
): void {
  let id: string;
  try {
    id = decodeURIComponent(path.slice("/v1/models/".length));
  } catch {
    id = path.slice("/v1/models/".length);
  }
  const model = modelById(deps.state, id);
  if (model !== null) return sendJson(res, 200, model);
  sendError(
    res,
    "openai",
    apiError("model_not_found", {
      model: id,
      why: "no connected worker serves it",
    }),
  );
}

/**
 * The model a request names and the body to forward: JSON `model` on the
 * inference routes (else X-Model), any of findModel's places elsewhere; an
 * alias becomes its target in the body (issue 25). `base64`: not UTF-8.
 */
function modelAndBody(
  req: HttpRequest,
  bytes: Buffer,
  deps: HttpDeps,
  anyPath: boolean,
):
  | { found: FoundModel; body: string; base64: boolean; asked?: string }
  | ClientError {
  const utf8 = anyPath ? isUtf8(bytes) : true;
  const text = utf8 ? bytes.toString("utf8") : null;
  const found = findModel(text, bytes, req.headers, !anyPath);
  if ("status" in found) return found;
  const target = aliasTarget(deps.state.config, found.model);
  if (target === found.model) {
    return { found, body: text ?? bytes.toString("base64"), base64: !utf8 };
  }
  const renamed = renameModel(
    bytes,
    text,
    found.source,
    target,
    multipartBoundary(req.headers["content-type"]),
  );
  if (found.source === "header") req.headers["x-model"] = target;
  const asked = found.model;
  found.model = target;
  return {
    found,
    asked,
    body: utf8 ? renamed.toString("utf8") : renamed.toString("base64"),
    base64: !utf8,
  };
}

/** GET /health: judged in the core (core/views/health.ts); uptime is the shell's clock. */
function health(res: HttpResponse, deps: HttpDeps): void {
  const answer = healthAnswer(
    deps.state,
    VERSION,
    deps.now() - deps.startedAtMs,
    deps.clusterHealth?.() ?? null,
  );
  sendJson(res, answer.status, answer.body);
}

function handleInference(
  req: HttpRequest,
  res: HttpResponse,
  deps: HttpDeps,
  api: ClientApi,
  path: string,
  /** Issue 25: a path forwarded as is (any method, body and model source). */
  anyPath: boolean,
): void {
  const access: Access = deps.authorize?.(req, api) ??
    { kind: "granted", grant: null };
  if (access.kind === "denied") {
    req.resume();
    return sendError(res, api, access.error);
  }
  const limits = { maxBytes: deps.maxBodyBytes, timeoutMs: deps.bodyTimeoutMs };
  readBody(req, res, limits, (bytes) => {
    const named = modelAndBody(req, bytes, deps, anyPath);
    if ("status" in named) return sendError(res, api, named);
    const parsed = named.found;
    const tenancy = readTenancy(
      req,
      parsed.fields,
      access.grant,
      deps.state.config.multiTenant,
    );
    if ("status" in tenancy) return sendError(res, api, tenancy);
    // The backend sees the tenant and priority the relay applied, not the claim.
    if (access.grant?.tenant != null) {
      req.headers["x-tenant-id"] = tenancy.tenant;
    }
    if (
      access.grant !== null &&
      (req.headers["x-priority"] !== undefined || tenancy.priority !== "normal")
    ) req.headers["x-priority"] = tenancy.priority;
    const requestId = newRequestId();
    const ctx = { res, api, ended: false, stalled: false };
    deps.clients.set(requestId, ctx);
    res.on("close", () => {
      if (ctx.ended) return;
      deps.clients.delete(requestId);
      deps.submit({ kind: "clientDisconnected", atMs: deps.now(), requestId });
    });
    deps.submit({
      kind: "requestReceived",
      atMs: deps.now(),
      requestId,
      api,
      endpointPath: path,
      ...(anyPath ? { method: req.method ?? "POST" } : {}),
      model: parsed.model,
      ...(named.asked === undefined ? {} : { modelAsked: named.asked }),
      isStreaming: parsed.stream,
      body: named.body,
      ...(named.base64 ? { bodyBase64: true } : {}),
      // The door's headers are lowercase names with one string each, the
      // relay's own key already taken out (authorize).
      headers: traced(deps, requestId, req.headers),
      tenant: tenancy.tenant,
      priority: tenancy.priority,
      cacheKey: tenancy.cacheKey,
      key: access.key ?? null,
      // Issue 33: read from the parsed body, never by matching its text.
      tokenAsk: tokenAskOf(parsed.fields),
    });
  }, (error) => sendError(res, api, error));
}
