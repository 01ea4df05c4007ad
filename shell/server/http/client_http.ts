// Client HTTP routes (C17): body limits and validation here, everything else in
// the core. Uses node:http because Deno.serve 2.9.6 does not notice a client that
// disconnects before any response byte when it sent headers and body in separate
// writes, while node:http notices within ~300 ms (checklist C46, measured).
import type { IncomingMessage, ServerResponse } from "node:http";
import type {
  ClientApi,
  ClientError,
  ClusterHealth,
  Event,
  State,
} from "../../../core/mod.ts";
import { healthAnswer, modelList, VERSION } from "../../../core/mod.ts";
import { readBody } from "./body.ts";
import type { Clients } from "./clients.ts";
import { applyCors } from "./cors.ts";
import { errorBody, errorHeaders } from "./errors.ts";
import { requestUrl, sendJson } from "./http_reply.ts";
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
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
  ) => boolean;
  /** CORS_ALLOW_ORIGINS for /v1/*; absent = no CORS headers. */
  corsAllowOrigins?: readonly string[];
  /** Client auth for inference routes; absent = everyone, as claimed. */
  authorize?: (req: IncomingMessage, api: ClientApi) => Access;
  /** Cluster mode: this instance's view of the shared log, for /health. */
  clusterHealth?: () => ClusterHealth;
};

/** A client's access: refused with an error, or let in with what its key allows (null: no key needed). */
export type Access =
  | { kind: "denied"; error: ClientError }
  | { kind: "granted"; grant: KeyGrant | null };

function sendError(
  res: ServerResponse,
  api: ClientApi,
  error: ClientError,
): void {
  res.writeHead(error.status, errorHeaders(error));
  res.end(errorBody(api, error));
}

function badRequest(code: string, message: string, status = 400): ClientError {
  return { status, code, message };
}

function lowercaseHeaders(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  const from = req.headers;
  for (const k in from) {
    const v = from[k];
    if (v !== undefined) out[k] = Array.isArray(v) ? v.join(", ") : v;
  }
  return out;
}

type Parsed =
  | { model: string; stream: boolean; fields: Record<string, unknown> }
  | ClientError;

/** Model and stream flag from the JSON body; the body itself is forwarded untouched. */
export function parseInference(body: string): Parsed {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return badRequest("invalid_json", "request body is not valid JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return badRequest("invalid_body", "request body must be a JSON object");
  }
  const obj = value as Record<string, unknown>;
  if (typeof obj.model !== "string" || obj.model.trim() === "") {
    return badRequest(
      "missing_model",
      'request body needs a "model" string (see GET /v1/models)',
    );
  }
  if (obj.stream !== undefined && typeof obj.stream !== "boolean") {
    return badRequest("invalid_stream", '"stream" must be true or false');
  }
  return { model: obj.model, stream: obj.stream === true, fields: obj };
}

export function handleHttp(
  req: IncomingMessage,
  res: ServerResponse,
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
      badRequest("bad_request", "malformed request target"),
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
        badRequest("method_not_allowed", `use POST for ${path}`, 405),
      );
    }
    return handleInference(req, res, deps, api, path);
  }
  if (req.method === "GET" && path === "/health") return health(res, deps);
  if (req.method === "GET" && path === "/v1/models") {
    // Issue 24: with keys required the model list wants a client key too (the
    // SDKs send theirs on models.list); either header, as on /v1/messages.
    const access = deps.authorize?.(req, "anthropic");
    if (access?.kind === "denied") {
      req.resume();
      return sendError(res, "openai", access.error);
    }
    return sendJson(res, 200, modelList(deps.state));
  }
  if (path === "/v1/worker/connect") {
    res.setHeader("upgrade", "websocket");
    return sendJson(res, 426, {
      error: {
        message:
          "workers connect here with a WebSocket upgrade and the X-Worker-Secret header",
        type: "invalid_request_error",
        code: "upgrade_required",
      },
    });
  }
  if (
    deps.extraRoutes?.(req, res, url ?? requestUrl(raw)!) === true
  ) return;
  sendError(
    res,
    "openai",
    badRequest("not_found", `no route for ${req.method} ${path}`, 404),
  );
}

/** GET /health: judged in the core (core/views/health.ts); uptime is the shell's clock. */
function health(res: ServerResponse, deps: HttpDeps): void {
  const answer = healthAnswer(
    deps.state,
    VERSION,
    deps.now() - deps.startedAtMs,
    deps.clusterHealth?.() ?? null,
  );
  sendJson(res, answer.status, answer.body);
}

function handleInference(
  req: IncomingMessage,
  res: ServerResponse,
  deps: HttpDeps,
  api: ClientApi,
  path: string,
): void {
  const access: Access = deps.authorize?.(req, api) ??
    { kind: "granted", grant: null };
  if (access.kind === "denied") {
    req.resume();
    return sendError(res, api, access.error);
  }
  const limits = { maxBytes: deps.maxBodyBytes, timeoutMs: deps.bodyTimeoutMs };
  readBody(req, res, limits, (bytes) => {
    const body = bytes.toString("utf8");
    const parsed = parseInference(body);
    if ("status" in parsed) return sendError(res, api, parsed);
    const tenancy = readTenancy(req, parsed.fields, access.grant);
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
      model: parsed.model,
      isStreaming: parsed.stream,
      body,
      headers: lowercaseHeaders(req),
      tenant: tenancy.tenant,
      priority: tenancy.priority,
      cacheKey: tenancy.cacheKey,
    });
  }, (error) => sendError(res, api, error));
}
