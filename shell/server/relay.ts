// The whole relay assembled: the server (server.ts) with the day-two
// operations wired in through its hooks (issue 7) — the admin API, client API
// keys, /metrics, /dashboard and /setup — and the lifecycle routes with their
// governance. `startRelay` is what `deno task server` runs; tests start it the
// same way.
import type { HttpRequest, HttpResponse } from "./door/exchange.ts";
import { apiError, type ClientApi, type ClientError } from "../../core/mod.ts";
import type { Logger } from "../log.ts";
import { type AdminDeps, handleAdmin } from "./ops/admin.ts";
import type { ClusterRuntime } from "./cluster/runtime.ts";
import {
  type FleetUsageDeps,
  type FleetView,
  handleUsagePeer,
  peersToAsk,
  sendFleetRequests,
  sendFleetUsage,
} from "./cluster/usage_fleet.ts";
import type { LifecycleCallers } from "./http/clients.ts";
import { replyError } from "./http/http_reply.ts";
import type { DatabaseSync } from "node:sqlite";
import {
  type KeyStore,
  keyStoreOn,
  keyTenant,
  openRelayDatabase,
  type VerifiedKey,
} from "./ops/api_keys.ts";
import type { Access } from "./http/client_http.ts";
import {
  type AccessPolicy,
  capabilitiesAccess,
  metricsAccess,
} from "./http/endpoint_access.ts";
import {
  type LifecycleRoutes,
  makeLifecycleRoutes,
} from "./ops/lifecycle_http.ts";
import { type Governance, readOpTokenKey } from "./ops/op_token.ts";
import { sqliteNonceStore } from "./ops/op_nonces.ts";
import { bearerToken } from "./secret.ts";
import { tenantMismatch } from "./http/tenancy.ts";
import { nowMs } from "./clock.ts";
import type { ServerConfig } from "./config.ts";
import { Metrics } from "./ops/metrics.ts";
import {
  type MetricsListener,
  startMetricsListener,
} from "./ops/metrics_listener.ts";
import { openUsageLedger, type UsageLedger } from "./ops/usage_ledger.ts";
import { makeTracer, type Tracer } from "./ops/tracing.ts";
import {
  type AuthThrottle,
  makeAuthThrottle,
  sendThrottled,
} from "./ops/auth_throttle.ts";
import { handlePages } from "./ops/pages.ts";
import {
  type RunningServer,
  type ServerHooks,
  SHORT_SECRET_CHARS,
  startServer,
} from "./server.ts";

export type Relay = RunningServer & {
  metrics: Metrics;
  /** The METRICS_PORT listener's port (issue 32); absent = none. */
  metricsPort?: number;
  keys: KeyStore | null;
  /** The usage ledger (issue 26); null when off. */
  ledger: UsageLedger | null;
};

/** Issue 32: client keys admit workers only when the operator said so. */
function workerKeyHook(
  config: ServerConfig,
  keys: KeyStore | null,
): { workerKeyValid?: (key: string) => boolean } {
  if (!config.apiKeysAsWorkerSecret || keys === null) return {};
  return { workerKeyValid: (key) => keys.verify(key) !== null };
}

/** Whether the key database is needed: keys are managed via the admin API and checked when required. */
export function needsKeyStore(config: ServerConfig): boolean {
  return config.requireApiKeys || config.adminToken !== "" ||
    config.apiKeysAsWorkerSecret === true;
}

/** The client API key of a request and its header: Bearer, or x-api-key on the Anthropic route. */
function clientKey(
  req: HttpRequest,
  api: ClientApi,
): { key: string; header: "authorization" | "x-api-key" } | null {
  const bearer = bearerToken(req);
  if (bearer !== null) return { key: bearer, header: "authorization" };
  if (api === "anthropic") {
    const x = req.headers["x-api-key"];
    const v = Array.isArray(x) ? x[0] : x;
    if (v !== undefined && v.trim() !== "") {
      return { key: v.trim(), header: "x-api-key" };
    }
  }
  return null;
}

/** The options the lifecycle routes' governance reads (spec 004). */
type GovernanceConfig = Pick<
  ServerConfig,
  "opTokenKeyPath" | "opTokenSigners" | "opTokenMinSigners"
>;

/** Governance for lifecycle routes: key file, signers, nonces (spec 004). */
function makeGovernance(
  config: GovernanceConfig,
  db: DatabaseSync | null,
  log: Logger,
): Governance {
  const path = config.opTokenKeyPath ?? "";
  const signers = config.opTokenSigners ?? [];
  const minSigners = config.opTokenMinSigners ?? 1;
  let key = readOpTokenKey(path);
  // Not configured at all is a normal setup (info); configured but unusable is a mistake (warn).
  if (typeof key === "string") log(path === "" ? "info" : "warn", key, {});
  else if (signers.length === 0) {
    log(
      "warn",
      "lifecycle operations are disabled: OP_TOKEN_SIGNERS is empty",
      {},
    );
  } else {
    log("info", "lifecycle operations enabled", {
      key_path: path,
      signers: signers.join(","),
      min_signers: minSigners,
    });
  }
  return {
    nonces: db === null ? null : sqliteNonceStore(db),
    policy() {
      // A key file created after start is picked up on the next call.
      if (typeof key === "string" && path !== "") key = readOpTokenKey(path);
      if (typeof key === "string") return key;
      if (signers.length === 0) {
        return "lifecycle operations are disabled: set OP_TOKEN_SIGNERS (the governance signers, e.g. admin1,admin2,admin3) and OP_TOKEN_MIN_SIGNERS";
      }
      return { key, signers, minSigners };
    },
  };
}

/** Which tokens open the fleet-describing endpoints (endpoint_access.ts). */
export function accessPolicy(config: ServerConfig): AccessPolicy {
  return {
    adminToken: config.adminToken,
    metricsToken: config.metricsToken ?? "",
    requireApiKeys: config.requireApiKeys,
  };
}

/** The client key check: who calls, and what the key allows. */
export type Authorize = (req: HttpRequest, api: ClientApi) => Access;

/**
 * Client auth for inference routes (and /v1/capabilities): the key and what it
 * allows. Built once by `startRelay`; every route that checks a client key is
 * handed this one.
 */
export function makeAuthorize(
  requireApiKeys: boolean,
  keys: KeyStore | null,
  metrics: Metrics,
  log: Logger,
  multiTenant = true,
): Authorize {
  const denied = (error: ClientError): Access => ({ kind: "denied", error });
  if (!requireApiKeys) return () => ({ kind: "granted", grant: null });
  return (req: HttpRequest, api: ClientApi): Access => {
    const found = clientKey(req, api);
    const how = api === "anthropic"
      ? "send Authorization: Bearer <key> or x-api-key: <key>"
      : "send Authorization: Bearer <key>";
    if (found === null) {
      metrics.authFailure("api_key");
      return denied(apiError("missing_api_key", { how }));
    }
    let key: VerifiedKey | null;
    try {
      key = keys?.verify(found.key) ?? null;
      if (key !== null) keys?.touch(key.id, Date.now());
    } catch (e) {
      log("error", "API key store failed", { error: String(e) });
      return denied(apiError("key_store_unavailable"));
    }
    if (key === null) {
      metrics.authFailure("api_key");
      return denied(apiError("invalid_api_key", { how }));
    }
    // Refused before the body is read, and logged with the key: a bound key
    // naming another tenant is a client trying to leave its own limits. A key
    // without a tenant is its own tenant unless it may name tenants (issue 24).
    // ENABLE_MULTI_TENANT=false (issue 32): every key is the one tenant's.
    const tenant = multiTenant ? keyTenant(key) : null;
    const mismatch = multiTenant
      ? tenantMismatch(req, tenant, key.tenant === null)
      : null;
    if (mismatch !== null) {
      metrics.authFailure("tenant_mismatch");
      log("warn", "tenant mismatch refused", {
        key_id: key.id,
        tenant: tenant ?? "",
        claimed: String(req.headers["x-tenant-id"]),
      });
      return denied(mismatch);
    }
    // The relay key is the relay's credential: it is not forwarded to workers.
    delete req.headers[found.header];
    return {
      kind: "granted",
      grant: { tenant, maxPriority: key.maxPriority },
      key: {
        id: key.id,
        name: key.name ?? key.id,
        rateLimit: key.limits?.rateLimit ?? null,
        tokenRateLimit: key.limits?.tokenRateLimit ?? null,
        tokenBudget: key.limits?.tokenBudget ?? null,
      },
    };
  };
}

/** What the operations routes are handed: each its own part, nothing of the configuration besides. */
export type RelayRoutesDeps = {
  authorize: Authorize;
  policy: AccessPolicy;
  /** The admin API's part of the configuration. */
  admin: Pick<ServerConfig, "adminToken" | "bodyTimeoutMs">;
  /** ENABLE_METRICS (issue 32): false = /metrics is not served; absent = true. */
  metricsEnabled?: boolean;
  keys: KeyStore | null;
  metrics: Metrics;
  server: () => RunningServer | null;
  lifecycle: LifecycleRoutes | null;
  /** Issue 26: the usage ledger (null = off) and the tracer; absent = none. */
  ledger?: UsageLedger | null;
  tracer?: Tracer | null;
  /** Issue 33: wrong admin and metrics tokens throttled per address; absent = none. */
  throttle?: AuthThrottle;
  /** Where a fleet-wide usage query logs a missing peer (issue 26); absent = nowhere. */
  log?: Logger;
};

export function makeRelayHooks(d: RelayRoutesDeps): ServerHooks {
  const { keys, metrics, lifecycle } = d;
  const extraRoutes = (
    req: HttpRequest,
    res: HttpResponse,
    url: URL,
  ): boolean => {
    const s = d.server();
    if (lifecycle?.handle(req, res, url) === true) return true;
    if (url.pathname === "/metrics") {
      if (d.metricsEnabled === false) return false;
      return serveMetrics(req, res, s, d, metrics);
    }
    const cluster = s?.cluster;
    if (
      cluster !== undefined &&
      handleUsagePeer(req, res, url, d.ledger ?? null, cluster.peerSecret())
    ) return true;
    if (
      handleAdmin(req, res, url, {
        adminToken: d.admin.adminToken,
        keys,
        metrics,
        state: () => s?.runtime.state ?? null,
        submit: (e) => s?.runtime.submit(e),
        now: nowMs,
        wallNow: Date.now,
        bodyTimeoutMs: d.admin.bodyTimeoutMs,
        ledger: d.ledger ?? null,
        ...(d.throttle === undefined ? {} : { throttle: d.throttle }),
        ...(cluster === undefined || d.ledger == null ? {} : {
          usageFleet: fleetUsageRoute({
            ledger: d.ledger,
            fleet: fleetView(cluster),
            log: d.log ?? (() => {}),
          }),
        }),
      })
    ) return true;
    return handlePages(req, res, url, {
      metrics,
      state: () => s?.runtime.state ?? null,
      modelsPublic: !d.policy.requireApiKeys,
    });
  };

  return {
    onEvent: (e) => metrics.onEvent(e),
    onEffect: (e) => {
      metrics.onEffect(e);
      if (e.kind === "requestFinished") {
        const wall = Date.now();
        d.ledger?.record(e, wall);
        d.tracer?.finish(e, wall);
      }
    },
    ...(d.tracer == null ? {} : { trace: d.tracer.start }),
    authorize: d.authorize,
    extraRoutes,
  };
}

/** What the fleet-wide usage queries see of the cluster: itself, its live peers, the secret. */
function fleetView(c: ClusterRuntime): FleetView {
  return {
    self: () => c.instanceId,
    peers: () => peersToAsk(c.cluster.instances, c.instanceId),
    secret: () => c.peerSecret(),
  };
}

/** /admin/usage and /admin/requests for the whole fleet; a local failure answers 500. */
function fleetUsageRoute(
  d: FleetUsageDeps,
): NonNullable<AdminDeps["usageFleet"]> {
  return (path, url, res) => {
    const answer = path === "/admin/usage"
      ? sendFleetUsage(res, url, d, Date.now())
      : sendFleetRequests(res, url, d);
    answer.catch((e) => {
      d.log("error", "fleet usage query failed", { error: String(e) });
      if (!res.headersSent) {
        replyError(
          res,
          apiError("internal_error", { what: "the usage query failed" }),
        );
      }
    });
  };
}

/** METRICS_PORT's listener when it is set and metrics are on, announced like the main port. */
async function startMetricsPort(
  config: ServerConfig,
  log: Logger,
  serve: (req: HttpRequest, res: HttpResponse) => void,
): Promise<MetricsListener | null> {
  if (config.metricsPort === undefined || config.enableMetrics === false) {
    return null;
  }
  const listener = await startMetricsListener(
    config.hostname,
    config.metricsPort,
    serve,
  );
  log("info", "metrics listening", {
    address: `${config.hostname}:${listener.port}`,
  });
  return listener;
}

/** GET /metrics: the Prometheus text, for whoever the access policy lets read it. */
function serveMetrics(
  req: HttpRequest,
  res: HttpResponse,
  s: RunningServer | null,
  d: Pick<RelayRoutesDeps, "policy" | "throttle">,
  metrics: Metrics,
): boolean {
  req.resume();
  if (req.method !== "GET" && req.method !== "HEAD") {
    replyError(
      res,
      apiError("method_not_allowed", { use: "GET", path: "/metrics" }),
      { allow: "GET" },
    );
    return true;
  }
  if (s === null) return false;
  const given = bearerToken(req);
  const waitSecs = given === null
    ? null
    : d.throttle?.refusedForSecs("metrics", req) ?? null;
  if (waitSecs !== null) {
    sendThrottled(res, waitSecs);
    return true;
  }
  const access = metricsAccess(req, d.policy);
  if (access.kind === "denied") {
    metrics.authFailure("metrics_token");
    if (given !== null) d.throttle?.failed("metrics", req);
    replyError(res, access.error, access.headers);
    return true;
  }
  res.writeHead(200, {
    "content-type": "text/plain; version=0.0.4; charset=utf-8",
    "cache-control": "no-store",
  });
  res.end(
    req.method === "HEAD" ? "" : metrics.prometheus(s.runtime.state, nowMs()),
  );
  return true;
}

/**
 * The relay's stores: one database for keys, op-token nonces and the usage
 * ledger (opened when any is needed), the cluster's key store in cluster mode,
 * and the span exporter; `closeDb` closes them all.
 */
async function openStores(
  config: ServerConfig,
  log: Logger,
  metrics: Metrics,
) {
  // One database for keys and op-token nonces, opened when either is needed.
  const lifecycleOn = (config.opTokenKeyPath ?? "") !== "";
  const db = needsKeyStore(config) || lifecycleOn
    ? openRelayDatabase(
      config.dbPath,
      (message, fields) => log("info", message, fields),
    )
    : null;
  // Issue 16: a cluster shares its keys through the engine, not this database.
  const clusterKeys = needsKeyStore(config) && config.clusterUrl !== undefined
    ? new (await import("./cluster/keys.ts")).ClusterKeyStore(log)
    : null;
  const keys = clusterKeys ??
    (needsKeyStore(config) && db !== null ? keyStoreOn(db) : null);
  // Issue 26: the ledger is kept where it can be read (the admin API), in the
  // same file as the keys; USAGE_RETENTION_DAYS=0 turns it off.
  const retention = config.usageRetentionDays ?? 30;
  const ledger = db !== null && needsKeyStore(config) && retention > 0
    ? openUsageLedger(
      db,
      retention,
      (e) =>
        log("error", "usage records not written; kept and tried again", {
          error: String(e),
        }),
      {
        recovered: (records, failures) =>
          log("info", "usage records written again", {
            records,
            failed_attempts: failures,
          }),
        dropped: (records) => {
          metrics.droppedUsageRecords(records);
          log("warn", "usage records dropped: too many waiting", { records });
        },
      },
    )
    : null;
  const tracer = makeTracer(
    config.otlpEndpoint ?? "",
    config.otelServiceName ?? "modelrelay",
    (e) => log("warn", "spans not exported", { error: String(e) }),
    (reason, spans) => metrics.droppedSpans(reason, spans),
  );
  const closeDb = () => {
    void tracer.close();
    ledger?.close();
    keys?.close();
    if (db?.isOpen === true) db.close();
  };
  return { db, clusterKeys, keys, ledger, tracer, closeDb };
}

/**
 * Issue 33: an operator token short enough to guess is warned about at start,
 * as WORKER_SECRET is (server.ts); the throttle slows guessing, the length
 * stops it.
 */
function warnShortTokens(config: ServerConfig, log: Logger): void {
  const tokens: [string, string, string][] = [
    ["MODELRELAY_ADMIN_TOKEN", config.adminToken, "the admin API"],
    ["METRICS_TOKEN", config.metricsToken ?? "", "/metrics"],
  ];
  for (const [name, token, guards] of tokens) {
    if (token === "" || token.length >= SHORT_SECRET_CHARS) continue;
    log(
      "warn",
      `${name} is shorter than ${SHORT_SECRET_CHARS} characters: it is all that guards ${guards}; use e.g. openssl rand -hex 24`,
      { length: token.length },
    );
  }
}

/**
 * Opens the key store (throws KeyStoreError on a damaged or unreadable database)
 * and starts the server with the operations hooks.
 */
export async function startRelay(
  config: ServerConfig,
  log: Logger,
): Promise<Relay> {
  const metrics = new Metrics(nowMs());
  const { db, clusterKeys, keys, ledger, tracer, closeDb } = await openStores(
    config,
    log,
    metrics,
  );
  warnShortTokens(config, log);
  if (config.requireApiKeys && config.adminToken === "") {
    log(
      "warn",
      "API keys are required but MODELRELAY_ADMIN_TOKEN is unset: no new key can be created",
      {},
    );
  }
  let running: RunningServer | null = null;
  // One key check and one token policy, for every route that asks.
  const authorize = makeAuthorize(
    config.requireApiKeys,
    keys,
    metrics,
    log,
    config.core.multiTenant,
  );
  const policy = accessPolicy(config);
  const callers: LifecycleCallers = new Map();
  const lifecycle = makeLifecycleRoutes({
    state: () => running?.runtime.state ?? null,
    submit: (e) => running?.runtime.submit(e),
    now: nowMs,
    wallNowSecs: () => Date.now() / 1000,
    governance: {
      ...makeGovernance(config, db, log),
      // Issue 16: a nonce spent on one instance is spent on all.
      ...(config.clusterUrl === undefined ? {} : {
        claimNonce: (nonce: string, _now: number, expiresAtSecs: number) =>
          running?.cluster?.engine.claimOnce(`nonce:${nonce}`, expiresAtSecs) ??
            Promise.resolve(false),
      }),
    },
    waits: () => metrics.queueWaitStats(),
    callers,
    bodyTimeoutMs: config.bodyTimeoutMs,
    log,
    capabilitiesAccess: (req) => capabilitiesAccess(req, policy, authorize),
  });
  const throttle = makeAuthThrottle(config.core, config.trustedProxies, nowMs);
  const hooks = makeRelayHooks({
    authorize,
    policy,
    admin: {
      adminToken: config.adminToken,
      bodyTimeoutMs: config.bodyTimeoutMs,
    },
    metricsEnabled: config.enableMetrics !== false,
    keys,
    metrics,
    server: () => running,
    lifecycle,
    ledger,
    tracer,
    throttle,
    log,
  });
  try {
    running = await startServer(config, log, {
      ...hooks,
      lifecycleCallers: callers,
      ...workerKeyHook(config, keys),
      // Keys loaded before the port opens: a new instance never answers 401
      // to a valid key (issue 23, found by the Sentinel test).
      beforeListen: async (cluster) => {
        if (clusterKeys !== null && cluster !== null) {
          await clusterKeys.attach(cluster, cluster.engine);
        }
      },
    });
  } catch (e) {
    closeDb();
    throw e;
  }
  const server = running;
  const metricsListener = await startMetricsPort(config, log, (req, res) => {
    if (!serveMetrics(req, res, server, { policy, throttle }, metrics)) {
      replyError(res, apiError("starting"));
    }
  }).catch(async (e) => {
    await server.close();
    closeDb();
    throw e;
  });
  return {
    ...server,
    metrics,
    keys,
    ledger,
    ...(metricsListener === null ? {} : { metricsPort: metricsListener.port }),
    shutdown: async () => {
      await server.shutdown();
      await metricsListener?.close();
      await tracer.close();
      closeDb();
    },
    close: async () => {
      await server.close();
      await metricsListener?.close();
      await tracer.close();
      closeDb();
    },
  };
}
