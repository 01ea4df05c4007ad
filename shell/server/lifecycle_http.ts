// Spec 004 routes for the fleet (issue 9): GET /v1/capabilities, and the governed
// lifecycle operations POST /v1/models/load (+ GET /v1/models/load/{taskId}),
// POST /v1/models/unload, POST /v1/cache/flush. Each POST checks its
// verifiedOpToken (op_token.ts) before anything reaches the core, then submits a
// lifecycleRequested event; the core picks the workers and answers through
// lifecycleTaskChanged effects, which this module's effect tap turns into HTTP
// answers. Task ids are minted here (random, unguessable: polling needs no token).
import { randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import {
  type Effect,
  type Event,
  type LifecycleOperation,
  type LifecycleTaskView,
  lifecycleTaskView,
  type State,
} from "../../core/mod.ts";
import type { Logger } from "../log.ts";
import { decodeSegment, sendAdminError } from "./admin.ts";
import { readBody } from "./body.ts";
import { capabilitiesView, type WaitStats } from "./capabilities.ts";
import type { CapabilitiesAccess } from "./endpoint_access.ts";
import { sendJson } from "./http_reply.ts";
import {
  type NonceStore,
  OP_TOKEN_FIELDS,
  OP_TOKEN_WINDOW_SECS,
  type OpTokenError,
  type OpTokenPolicy,
  verifyOpToken,
} from "./op_token.ts";

/** GET /v1/capabilities answers are reused this long unless the fleet's models change. */
export const CAPABILITIES_TTL_MS = 5_000;
const BODY_MAX = 64 * 1024;

export type Governance = {
  /** The policy, or why lifecycle routes are unavailable (503). */
  policy(): OpTokenPolicy | string;
  nonces: NonceStore | null;
  /**
   * A nonce store shared by a cluster (issue 16), asynchronous: claimed, like
   * `nonces`, only once every other check passed. Takes precedence over `nonces`.
   */
  claimNonce?: (
    nonce: string,
    nowSecs: number,
    expiresAtSecs: number,
  ) => Promise<boolean>;
};

/** Lets every nonce through verifyOpToken when the shared store claims it afterwards. */
const CLAIMED_LATER: NonceStore = { claim: () => true };

export type LifecycleDeps = {
  state: () => State | null;
  submit: (event: Event) => void;
  /** Monotonic ms (the core's clock). */
  now: () => number;
  /** Wall-clock seconds since the epoch (token issuedAt). */
  wallNowSecs: () => number;
  governance: Governance;
  waits: () => WaitStats;
  /** How long unload and flush wait for their task before answering 202. */
  waitMs: number;
  /** BODY_TIMEOUT_SECS in ms. */
  bodyTimeoutMs: number;
  log: Logger;
  /** Who may read /v1/capabilities, and whether with per-worker detail. */
  capabilitiesAccess: (req: IncomingMessage) => CapabilitiesAccess;
  /** Cluster mode (issue 16): a submitted event reaches the state a log hop later. */
  submitIsAsync?: boolean;
};

export type LifecycleRoutes = {
  handle(req: IncomingMessage, res: ServerResponse, url: URL): boolean;
  onEvent(e: Event): void;
  onEffect(e: Effect): void;
  /** Ends pending waits (server closing). */
  close(): void;
};

function sendError(
  res: ServerResponse,
  status: number,
  code: string,
  message: string,
  extra: Record<string, unknown> = {},
): void {
  sendAdminError(res, status, code, message, {}, extra);
}

/** A JSON object body, or why not; size and time bounds refuse in readBody. */
function readJson(
  req: IncomingMessage,
  res: ServerResponse,
  timeoutMs: number,
  onDone: (body: Record<string, unknown> | string) => void,
): void {
  readBody(req, res, { maxBytes: BODY_MAX, timeoutMs }, (bytes) => {
    let v: unknown;
    try {
      v = JSON.parse(bytes.toString("utf8"));
    } catch {
      return onDone("request body is not valid JSON");
    }
    if (typeof v !== "object" || v === null || Array.isArray(v)) {
      return onDone("request body must be a JSON object");
    }
    onDone(v as Record<string, unknown>);
  }, (e) => sendError(res, e.status, e.code, e.message));
}

const FLUSH_SCOPES = ["all", "model", "tenant", "tag"];

/** The spec's load-status document for any task (load, unload or flush). */
export function taskDocument(t: LifecycleTaskView): Record<string, unknown> {
  const results = t.parts.map((p) => p.result ?? {});
  const sum = (k: string) => {
    const vals = results.map((r) => r[k]).filter((v) => typeof v === "number");
    return vals.length === 0
      ? null
      : (vals as number[]).reduce((a, b) => a + b, 0);
  };
  const status = t.status === "running"
    ? (t.operation === "model-load" ? "loading" : "running")
    : t.status;
  return {
    taskId: t.id,
    operation: t.operation,
    status,
    modelId: t.modelId,
    progress: Math.round(t.progress * 1000) / 1000,
    eta: sum("eta"),
    ...(t.operation === "model-load"
      ? {
        gpuMemoryUsedMB: sum("gpuMemoryUsedMB"),
        loadTimeMs: t.finishedAtMs === null
          ? null
          : sum("loadTimeMs") ?? Math.round(t.finishedAtMs - t.createdAtMs),
      }
      : {}),
    ...(t.error === null ? {} : { error: t.error.message }),
    workers: t.parts.map((p) => ({
      workerId: p.workerId,
      name: p.workerName,
      status: p.status,
      progress: p.progress,
      ...(p.error === null ? {} : { error: p.error }),
      ...(p.result === null ? {} : { result: p.result }),
    })),
  };
}

export function makeLifecycleRoutes(d: LifecycleDeps): LifecycleRoutes {
  const waiters = new Map<string, Set<(t: LifecycleTaskView) => void>>();
  const cache = new Map<string, { atMs: number; body: unknown }>();

  function capabilities(
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
  ): void {
    const access = d.capabilitiesAccess(req);
    if (access.kind === "denied") {
      return sendAdminError(
        res,
        access.status,
        access.code,
        access.message,
        access.headers,
      );
    }
    const detail = access.kind === "detail";
    const state = d.state();
    if (state === null) return sendError(res, 503, "starting", "starting up");
    const workerId = url.searchParams.get("worker");
    if (workerId !== null && !detail) {
      return sendError(
        res,
        403,
        "admin_only",
        "per-worker capabilities (?worker=) need the admin token (Authorization: Bearer <MODELRELAY_ADMIN_TOKEN>)",
      );
    }
    const key = `${detail ? "detail" : "fleet"}:${workerId ?? ""}`;
    const hit = cache.get(key);
    let body = hit !== undefined && d.now() - hit.atMs < CAPABILITIES_TTL_MS
      ? hit.body
      : null;
    if (body === null) {
      body = capabilitiesView(state, d.waits(), workerId, detail);
      if (body === null) {
        return sendError(
          res,
          404,
          "worker_not_found",
          `no connected worker "${workerId}" (see GET /admin/workers)`,
        );
      }
      if (cache.size > 64) cache.clear();
      cache.set(key, { atMs: d.now(), body });
    }
    sendJson(res, 200, body, {
      "cache-control": `max-age=${CAPABILITIES_TTL_MS / 1000}`,
    });
  }

  function waitFor(
    taskId: string,
    ms: number,
  ): Promise<LifecycleTaskView | null> {
    return new Promise((resolve) => {
      let set = waiters.get(taskId);
      if (set === undefined) {
        set = new Set();
        waiters.set(taskId, set);
      }
      const timer = setTimeout(() => {
        set.delete(done);
        if (set.size === 0) waiters.delete(taskId);
        resolve(null);
      }, ms);
      const done = (t: LifecycleTaskView) => {
        clearTimeout(timer);
        resolve(t);
      };
      set.add(done);
    });
  }

  /** Checks governance and the token; on success submits the task and returns its id. */
  async function start(
    res: ServerResponse,
    body: Record<string, unknown>,
    operation: LifecycleOperation,
    modelId: string | null,
    params: Record<string, unknown>,
  ): Promise<LifecycleTaskView | null> {
    const policy = d.governance.policy();
    const shared = d.governance.claimNonce;
    const nonces = shared === undefined ? d.governance.nonces : CLAIMED_LATER;
    if (typeof policy === "string" || nonces === null) {
      sendError(
        res,
        503,
        "lifecycle_unconfigured",
        typeof policy === "string" ? policy : "the nonce store is unavailable",
      );
      return null;
    }
    const verified = verifyOpToken(
      body.verifiedOpToken,
      { operation, modelId, params: signedParams(body) },
      policy,
      nonces,
      d.wallNowSecs(),
    );
    if (
      !("status" in verified) && shared !== undefined &&
      !(await shared(
        verified.nonce,
        d.wallNowSecs(),
        verified.issuedAt + OP_TOKEN_WINDOW_SECS,
      ).catch(() => false))
    ) {
      sendError(
        res,
        409,
        "op_token_replayed",
        "verifiedOpToken nonce was already used (or the shared nonce store is unreachable): every operation needs a fresh token",
      );
      return null;
    }
    if ("status" in verified) {
      const e = verified as OpTokenError;
      d.log("warn", "lifecycle call refused", {
        operation,
        code: e.code,
        model: modelId ?? "",
      });
      sendError(res, e.status, e.code, e.message);
      return null;
    }
    const state = d.state();
    if (state === null) {
      sendError(res, 503, "starting", "starting up");
      return null;
    }
    const prefix = operation === "model-load"
      ? "load"
      : operation === "model-unload"
      ? "unload"
      : "flush";
    const taskId = `${prefix}-${randomBytes(12).toString("hex")}`;
    const workerId = typeof body.workerId === "string" ? body.workerId : null;
    d.log("info", "lifecycle call verified", {
      operation,
      task_id: taskId,
      model: modelId ?? "",
      signers: verified.signers.join(","),
    });
    d.submit({
      kind: "lifecycleRequested",
      atMs: d.now(),
      taskId,
      operation,
      modelId,
      params,
      workerId,
    });
    let view = lifecycleTaskView(state, taskId);
    // In cluster mode the event reaches the core after a trip through the log.
    for (let i = 0; view === null && d.submitIsAsync === true && i < 400; i++) {
      await new Promise((r) => setTimeout(r, 5));
      view = lifecycleTaskView(d.state() ?? state, taskId);
    }
    if (view === null) {
      sendError(res, 500, "task_lost", "the task was not recorded");
      return null;
    }
    if (view.status === "failed" && view.error !== null) {
      sendError(res, view.error.status, view.error.code, view.error.message, {
        taskId,
      });
      return null;
    }
    return view;
  }

  /** What the token must sign besides operation and modelId: the rest of the body. */
  function signedParams(
    body: Record<string, unknown>,
  ): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(body)) {
      if (k !== "verifiedOpToken" && k !== "modelId") out[k] = v;
    }
    return out;
  }

  function paramsOf(body: Record<string, unknown>): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(body)) {
      if (k !== "workerId") out[k] = v;
    }
    return out;
  }

  async function finishLater(
    res: ServerResponse,
    view: LifecycleTaskView,
    answer: (t: LifecycleTaskView) => Record<string, unknown>,
  ): Promise<void> {
    const done = view.status === "running"
      ? await waitFor(view.id, d.waitMs)
      : view;
    if (done === null) {
      const now = lifecycleTaskView(d.state()!, view.id) ?? view;
      return sendJson(res, 202, taskDocument(now));
    }
    if (done.status === "failed" && done.error !== null) {
      return sendError(
        res,
        done.error.status,
        done.error.code,
        done.error.message,
        {
          task: taskDocument(done),
        },
      );
    }
    sendJson(res, 200, answer(done));
  }

  function modelIdOf(
    res: ServerResponse,
    body: Record<string, unknown>,
  ): string | null {
    if (typeof body.modelId === "string" && body.modelId.trim() !== "") {
      return body.modelId;
    }
    sendError(
      res,
      400,
      "missing_model_id",
      'request body needs a "modelId" string',
    );
    return null;
  }

  function post(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
  ): void {
    readJson(req, res, d.bodyTimeoutMs, async (body) => {
      if (typeof body === "string") {
        return sendError(res, 400, "invalid_body", body);
      }
      // The token's own field names cannot be call parameters: they would be
      // indistinguishable from the token's metadata in what is signed.
      const reserved = OP_TOKEN_FIELDS.filter((k) =>
        k !== "modelId" && k in body
      );
      if (reserved.length > 0) {
        return sendError(
          res,
          400,
          "invalid_body",
          `${
            reserved.join(", ")
          } belong inside verifiedOpToken.opToken, not in the request body`,
        );
      }
      const results = (t: LifecycleTaskView) =>
        t.parts.map((p) => p.result ?? {});
      const sum = (t: LifecycleTaskView, k: string) =>
        results(t).reduce(
          (a, r) => a + (typeof r[k] === "number" ? r[k] as number : 0),
          0,
        );
      if (path === "/v1/models/load") {
        const modelId = modelIdOf(res, body);
        if (modelId === null) return;
        const view = await start(
          res,
          body,
          "model-load",
          modelId,
          paramsOf(body),
        );
        if (view === null) return;
        const doc = taskDocument(view);
        return sendJson(res, 202, {
          taskId: view.id,
          status: "loading",
          progress: doc.progress,
          eta: doc.eta,
          modelId,
          workers: doc.workers,
        });
      }
      if (path === "/v1/models/unload") {
        const modelId = modelIdOf(res, body);
        if (modelId === null) return;
        const view = await start(
          res,
          body,
          "model-unload",
          modelId,
          paramsOf(body),
        );
        if (view === null) return;
        return void finishLater(res, view, (t) => ({
          modelId,
          gpuMemoryFreedMB: sum(t, "gpuMemoryFreedMB"),
          kvCacheFlushed: results(t).every((r) => r.kvCacheFlushed !== false),
          taskId: t.id,
          workers: taskDocument(t).workers,
        }));
      }
      // /v1/cache/flush
      const scope = body.scope ?? "all";
      if (typeof scope !== "string" || !FLUSH_SCOPES.includes(scope)) {
        return sendError(
          res,
          400,
          "invalid_scope",
          `"scope" must be one of ${FLUSH_SCOPES.join(", ")}`,
        );
      }
      const need = { model: "modelId", tenant: "tenantId", tag: "tag" }[
        scope as "model" | "tenant" | "tag"
      ];
      if (
        need !== undefined &&
        (typeof body[need] !== "string" || body[need] === "")
      ) {
        return sendError(
          res,
          400,
          "missing_scope_value",
          `scope "${scope}" needs a "${need}" string`,
        );
      }
      const modelId = typeof body.modelId === "string" ? body.modelId : null;
      const view = await start(res, body, "cache-flush", modelId, {
        ...paramsOf(body),
        scope,
      });
      if (view === null) return;
      return void finishLater(res, view, (t) => ({
        flushed: true,
        entriesRemoved: sum(t, "entriesRemoved"),
        memoryFreedMB: sum(t, "memoryFreedMB"),
        taskId: t.id,
        workers: taskDocument(t).workers,
      }));
    });
  }

  function handle(
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
  ): boolean {
    const path = url.pathname;
    if (path === "/v1/capabilities") {
      req.resume();
      if (req.method !== "GET") {
        sendError(
          res,
          405,
          "method_not_allowed",
          "use GET for /v1/capabilities",
        );
      } else capabilities(req, res, url);
      return true;
    }
    if (path.startsWith("/v1/models/load/")) {
      req.resume();
      const raw = path.slice("/v1/models/load/".length);
      const id = decodeSegment(raw);
      const state = d.state();
      const view = state === null || id === null
        ? null
        : lifecycleTaskView(state, id);
      if (req.method !== "GET") {
        sendError(res, 405, "method_not_allowed", `use GET for ${path}`);
      } else if (id === null) {
        sendError(
          res,
          400,
          "invalid_task_id",
          `the task id "${raw}" has a malformed percent-escape`,
        );
      } else if (view === null) {
        sendError(
          res,
          404,
          "task_not_found",
          `no lifecycle task "${id}" (finished tasks are kept for a while, then forgotten)`,
        );
      } else sendJson(res, 200, taskDocument(view));
      return true;
    }
    if (
      path === "/v1/models/load" || path === "/v1/models/unload" ||
      path === "/v1/cache/flush"
    ) {
      if (req.method !== "POST") {
        req.resume();
        sendError(res, 405, "method_not_allowed", `use POST for ${path}`);
        return true;
      }
      post(req, res, path);
      return true;
    }
    return false;
  }

  return {
    handle,
    onEvent(e) {
      switch (e.kind) {
        case "registerReceived":
        case "modelsUpdateReceived":
        case "capabilitiesReceived":
        case "workerDisconnected":
          cache.clear();
          return;
        default:
          return;
      }
    },
    onEffect(e) {
      if (e.kind !== "lifecycleTaskChanged") return;
      cache.clear();
      if (e.task.status === "running") return;
      const set = waiters.get(e.task.id);
      if (set === undefined) return;
      waiters.delete(e.task.id);
      for (const w of set) w(e.task);
    },
    close() {
      for (const [id, set] of waiters) {
        const view = d.state() === null
          ? null
          : lifecycleTaskView(d.state()!, id);
        waiters.delete(id);
        if (view !== null) { for (const w of set) w(view); }
      }
    },
  };
}

/** Reads the key file: its bytes without trailing CR/LF; an error text when unusable. */
export function readOpTokenKey(path: string): Uint8Array | string {
  if (path === "") {
    return "lifecycle operations are disabled: set VERIFIED_OP_TOKEN_KEY_PATH (--verified-op-token-key-path) to a file holding the shared HMAC key, and OP_TOKEN_SIGNERS / OP_TOKEN_MIN_SIGNERS";
  }
  let bytes: Uint8Array;
  try {
    bytes = Deno.readFileSync(path);
  } catch (e) {
    return `lifecycle operations are unavailable: cannot read the op-token key at VERIFIED_OP_TOKEN_KEY_PATH "${path}": ${
      (e as Error).message
    }`;
  }
  let end = bytes.length;
  while (end > 0 && (bytes[end - 1] === 0x0a || bytes[end - 1] === 0x0d)) end--;
  if (end < 16) {
    return `lifecycle operations are unavailable: the op-token key at "${path}" is shorter than 16 bytes`;
  }
  return bytes.slice(0, end);
}
