// Server configuration: the original's env names and defaults (spec, Configuration
// Quick Reference), plus ours, each also settable by flag.
import {
  type Config as CoreConfig,
  makeConfig,
  noTenantLimits,
  type RateLimit,
  type TenantLimits,
  type TokenLimit,
} from "../../core/mod.ts";
import {
  LOG_OPTIONS,
  type LogSettings,
  logSettings,
  withRustLog,
} from "../log.ts";
import {
  DEFAULT_TRUSTED_PROXIES,
  parseTrustedProxies,
  type TrustedProxies,
} from "./http/client_address.ts";
import { defaultMaxConnections } from "./http/connection_cap.ts";
import {
  bool,
  canonicalArgs,
  helpText,
  int,
  OptionError,
  type OptionSpec,
  type OptionValues,
  readOptions,
  str,
} from "../options.ts";

export const SERVER_OPTIONS: OptionSpec[] = [
  {
    flag: "listen-addr",
    env: "LISTEN_ADDR",
    kind: "string",
    default: "127.0.0.1:8080",
    help: "HTTP listen address host:port",
    aliases: ["listen"],
  },
  {
    flag: "provider-name",
    env: "PROVIDER_NAME",
    kind: "string",
    default: "local",
    help: "provider name workers connect to and requests route to",
    aliases: ["provider"],
  },
  {
    flag: "worker-secret",
    env: "WORKER_SECRET",
    kind: "secret",
    default: null,
    help: "shared secret workers must present (X-Worker-Secret)",
  },
  {
    flag: "max-queue-len",
    env: "MAX_QUEUE_LEN",
    kind: "int",
    default: "100",
    min: 0,
    help:
      "queued requests before 503 queue_full (0 = unlimited, as in the original)",
    envAliases: ["MAX_QUEUE_DEPTH"],
  },
  {
    flag: "queue-timeout-secs",
    env: "QUEUE_TIMEOUT_SECS",
    kind: "int",
    default: "30",
    min: 0,
    help:
      "longest wait in the queue before 504 (0 = none, as in the original); spec 004's QUEUE_TIMEOUT_MS is read when this is unset",
    aliases: ["queue-timeout"],
  },
  {
    flag: "request-timeout-secs",
    env: "REQUEST_TIMEOUT_SECS",
    kind: "int",
    default: "300",
    min: 0,
    help:
      "time to first byte from arrival; then the idle limit of a stream (0 = none, as in the original)",
    aliases: ["request-timeout"],
  },
  ...LOG_OPTIONS,
  {
    flag: "admin-token",
    env: "MODELRELAY_ADMIN_TOKEN",
    kind: "secret",
    default: "",
    help: "Bearer token for /admin/*; unset = admin answers 403",
  },
  {
    flag: "require-api-keys",
    env: "MODELRELAY_REQUIRE_API_KEYS",
    kind: "bool",
    default: "false",
    help: "require a client API key on inference routes",
  },
  {
    flag: "api-keys-as-worker-secret",
    env: "API_KEYS_AS_WORKER_SECRET",
    kind: "bool",
    default: "false",
    help:
      "a client API key (POST /admin/keys) is also accepted as a worker's secret, as in the original; off = only WORKER_SECRET admits a worker",
  },
  {
    flag: "db-path",
    env: "MODELRELAY_DB_PATH",
    kind: "string",
    default: "modelrelay.db",
    help: "SQLite file for API keys (:memory: allowed)",
  },
  {
    flag: "max-body-bytes",
    env: "MAX_BODY_BYTES",
    kind: "int",
    default: String(10 * 1024 * 1024),
    min: 1,
    help: "largest request body before 413",
  },
  {
    flag: "drain-timeout-secs",
    env: "DRAIN_TIMEOUT_SECS",
    kind: "int",
    default: "30",
    min: 0,
    help: "how long a drain or shutdown waits for in-flight work",
  },
  {
    flag: "max-stream-bytes",
    env: "MAX_STREAM_BYTES",
    kind: "int",
    default: String(64 * 1024 * 1024),
    min: 1,
    help: "cumulative size of one streamed response before it is cut",
  },
  {
    flag: "max-response-body-bytes",
    env: "MAX_RESPONSE_BODY_BYTES",
    kind: "int",
    default: String(64 * 1024 * 1024),
    min: 1,
    help:
      "largest non-streaming response a worker may send in pieces (body-chunks-v1); beyond it the request fails 502 response_too_large",
  },
  {
    flag: "max-buffered-response-bytes",
    env: "MAX_BUFFERED_RESPONSE_BYTES",
    kind: "int",
    default: String(512 * 1024 * 1024),
    min: 1,
    help:
      "non-streaming response bytes the server holds at once, all requests together; a piece beyond it fails its request 503 response_buffer_full with Retry-After",
  },
  {
    flag: "tenant-max-buffered-response-bytes",
    env: "TENANT_MAX_BUFFERED_RESPONSE_BYTES",
    kind: "string",
    default: "",
    help:
      "what one tenant's non-streaming answers may hold of MAX_BUFFERED_RESPONSE_BYTES; a piece beyond it fails 503 response_buffer_full (none = half of MAX_BUFFERED_RESPONSE_BYTES)",
  },
  {
    flag: "client-write-timeout-secs",
    env: "CLIENT_WRITE_TIMEOUT_SECS",
    kind: "int",
    default: "30",
    min: 1,
    help:
      "a client that takes none of a non-streaming answer's bytes for this long is cut, and the bytes held for it are let go",
  },
  {
    flag: "model-grace-secs",
    env: "MODEL_GRACE_SECS",
    kind: "int",
    default: "300",
    min: 0,
    help:
      "a model whose last worker left within this long is queued (504 at the queue timeout), not answered 404, while other workers are connected",
  },
  {
    flag: "sse-keepalive-secs",
    env: "SSE_KEEPALIVE_SECS",
    kind: "int",
    default: "0",
    min: 0,
    help:
      "a streaming request with no backend byte yet (queued, or waiting for a load) gets an SSE comment `: keep-alive` after this many seconds without a line; 0 = off",
  },
  {
    flag: "model-drain-max",
    env: "MODEL_DRAIN_MAX",
    kind: "int",
    default: "8",
    min: 1,
    help:
      "requests of its loaded models a worker takes in a row while a model no worker has loaded waits for its room; then it lets that model load (workers that report residency only)",
  },
  {
    flag: "client-buffer-bytes",
    env: "CLIENT_BUFFER_BYTES",
    kind: "int",
    default: String(4 * 1024 * 1024),
    min: 1024,
    help:
      "unsent bytes buffered for a slow client before its request is cancelled",
  },
  {
    flag: "heartbeat-interval-secs",
    env: "HEARTBEAT_INTERVAL_SECS",
    kind: "int",
    default: "15",
    min: 1,
    help: "ping period",
  },
  {
    flag: "heartbeat-timeout-secs",
    env: "HEARTBEAT_TIMEOUT_SECS",
    kind: "int",
    default: "45",
    min: 1,
    help: "no pong for this long closes the worker",
  },
  {
    flag: "require-protocol-version",
    env: "REQUIRE_PROTOCOL_VERSION",
    kind: "bool",
    default: "false",
    help: "refuse workers that send no protocol_version",
  },
  {
    flag: "default-rate-limit",
    env: "DEFAULT_RATE_LIMIT",
    kind: "string",
    default: "",
    help:
      "per-tenant limit for tenants without their own, e.g. 100req/min or 100req/min,20000tok/min (none = unlimited); one tenant's: TENANT_RATE_LIMIT_<tenant>=500req/min",
  },
  {
    flag: "default-token-budget",
    env: "DEFAULT_TOKEN_BUDGET",
    kind: "string",
    default: "",
    help:
      "token budget of tenants without their own, e.g. 5000000tok/day (or tok/hour, tok/month; none = unlimited); one tenant's: TENANT_TOKEN_BUDGET_<tenant>=...",
  },
  {
    flag: "usage-retention-days",
    env: "USAGE_RETENTION_DAYS",
    kind: "string",
    default: "30",
    help:
      "days the usage ledger keeps each request's record in MODELRELAY_DB_PATH (0 = no ledger)",
  },
  {
    flag: "tenant-max-queue-len",
    env: "TENANT_MAX_QUEUE_LEN",
    kind: "string",
    default: "",
    help: "queued requests one tenant may hold (none = MAX_QUEUE_LEN)",
  },
  {
    flag: "affinity-load-margin",
    env: "AFFINITY_LOAD_MARGIN",
    kind: "int",
    default: "2",
    min: 0,
    help:
      "how much busier than the least-loaded worker a cache-affine worker may be",
  },
  {
    flag: "verified-op-token-key-path",
    env: "VERIFIED_OP_TOKEN_KEY_PATH",
    kind: "string",
    default: "",
    help:
      "file holding the HMAC-SHA256 key for spec 004 op tokens (e.g. /etc/safebox/model-api.key); unset = /v1/models/load, /v1/models/unload and /v1/cache/flush answer 503",
  },
  {
    flag: "op-token-signers",
    env: "OP_TOKEN_SIGNERS",
    kind: "string",
    default: "",
    help:
      "comma-separated approver names an op token may list (the N of M-of-N; recorded in the token, which one shared key signs), e.g. admin1,admin2,admin3",
  },
  {
    flag: "op-token-min-signers",
    env: "OP_TOKEN_MIN_SIGNERS",
    kind: "int",
    default: "1",
    min: 1,
    help:
      "distinct OP_TOKEN_SIGNERS names an op token must list (the M of M-of-N)",
  },
  {
    flag: "otel-exporter-otlp-endpoint",
    env: "OTEL_EXPORTER_OTLP_ENDPOINT",
    kind: "string",
    default: "",
    help:
      "OTLP/HTTP collector (e.g. http://127.0.0.1:4318): each request's spans go to <endpoint>/v1/traces (unset = none; traceparent is passed to backends either way)",
  },
  {
    flag: "otel-service-name",
    env: "OTEL_SERVICE_NAME",
    kind: "string",
    default: "modelrelay",
    help: "service.name of the spans sent to OTEL_EXPORTER_OTLP_ENDPOINT",
  },
  {
    flag: "metrics-token",
    env: "METRICS_TOKEN",
    kind: "secret",
    default: "",
    help:
      "Bearer token Prometheus sends for /metrics (the admin token works too); required when API keys are required or this is set, else /metrics is open",
  },
  {
    flag: "enable-metrics",
    env: "ENABLE_METRICS",
    kind: "bool",
    default: "true",
    help: "serve /metrics (spec 004); false = /metrics answers 404",
  },
  {
    flag: "metrics-port",
    env: "METRICS_PORT",
    kind: "string",
    default: "",
    help:
      "a second listener, on LISTEN_ADDR's host and this port, that serves only /metrics (spec 004, e.g. 9090); the main port keeps /metrics too; unset = none",
  },
  {
    flag: "enable-multi-tenant",
    env: "ENABLE_MULTI_TENANT",
    kind: "bool",
    default: "true",
    help:
      "tenants from X-Tenant-ID and API keys (spec 004); false = every request is tenant default and X-Tenant-ID is not read",
  },
  {
    flag: "cors-allow-origins",
    env: "CORS_ALLOW_ORIGINS",
    kind: "string",
    default: "*",
    help:
      "browser origins allowed to call /v1/*: * for any, or a comma-separated list such as https://app.example.com",
  },
  {
    flag: "trusted-proxies",
    env: "TRUSTED_PROXIES",
    kind: "string",
    default: DEFAULT_TRUSTED_PROXIES,
    help:
      "comma-separated addresses or CIDR blocks (IPv4, IPv6) whose X-Forwarded-For is believed, for workers and clients; empty = nobody's",
  },
  {
    flag: "register-timeout-secs",
    env: "REGISTER_TIMEOUT_SECS",
    kind: "int",
    default: "10",
    min: 1,
    help:
      "a worker socket that sends no register message within this is closed",
  },
  {
    flag: "body-timeout-secs",
    env: "BODY_TIMEOUT_SECS",
    kind: "int",
    default: "30",
    min: 1,
    help:
      "a request body not received in full within this gets 408 and the connection is closed",
  },
  {
    flag: "max-connections",
    env: "MAX_CONNECTIONS",
    kind: "string",
    default: "auto",
    help:
      "open client connections before new ones get 503 (auto = 80% of the open-file limit, 1024 where unknown); authenticated workers are not counted",
  },
  {
    flag: "tick-ms",
    env: "TICK_MS",
    kind: "int",
    default: "250",
    min: 10,
    help: "timer resolution for deadlines",
  },
  {
    flag: "model-aliases",
    env: "MODEL_ALIASES",
    kind: "string",
    default: "",
    help:
      "comma-separated alias=model pairs, e.g. gpt-4o-mini=llama3.1:8b: a request for the alias is routed as the model, whose name the backend receives",
  },
  {
    flag: "forward-path-prefixes",
    env: "FORWARD_PATH_PREFIXES",
    kind: "string",
    default: "",
    help:
      "comma-separated path prefixes outside /v1/ forwarded to workers, e.g. /tokenize,/detokenize (every /v1/ path the relay does not answer is forwarded already)",
  },
  {
    flag: "cluster-url",
    env: "CLUSTER_URL",
    kind: "string",
    default: "",
    help:
      "Redis for many instances acting as one: redis://host:6379/0, unix:///path/redis.sock or redis-sentinel://host:26379,host:26379/master; unset = one instance",
  },
  {
    flag: "cluster-prefix",
    env: "CLUSTER_PREFIX",
    kind: "string",
    default: "mr:",
    help:
      "key prefix of this cluster's log in Redis (a new prefix = a new cluster)",
  },
  {
    flag: "cluster-log-timeout-ms",
    env: "CLUSTER_LOG_TIMEOUT_MS",
    kind: "int",
    default: "5000",
    min: 100,
    help:
      "how long a silent Redis (no connection or no answer) is waited for, commands held and retried, before the log counts as lost and new requests get 503",
  },
  {
    flag: "cluster-advertise-url",
    env: "CLUSTER_ADVERTISE_URL",
    kind: "string",
    default: "",
    help:
      "where the other instances reach this one for answer bytes (http://host:port, on this server's port); unset = the LISTEN_ADDR host and the bound port, 127.0.0.1 when it listens on every address: set it when instances run on more than one host",
  },
  {
    flag: "cluster-secret",
    env: "CLUSTER_SECRET",
    kind: "secret",
    default: "",
    help:
      "secret of the links between instances (the same on every instance); unset = one generated and kept in the cluster's Redis",
  },
  {
    flag: "cluster-log-lost-ms",
    env: "CLUSTER_LOG_LOST_MS",
    kind: "int",
    default: "15000",
    min: 1000,
    help:
      "once the log is declared lost (CLUSTER_LOG_TIMEOUT_MS), how long an instance holds its streams and workers before it gives them up and rejoins (meanwhile they keep flowing; new requests get 503)",
  },
];

export type ServerConfig = LogSettings & {
  hostname: string;
  port: number;
  workerSecret: string;
  adminToken: string;
  requireApiKeys: boolean;
  /** Issue 32: API_KEYS_AS_WORKER_SECRET; absent = false. */
  apiKeysAsWorkerSecret?: boolean;
  dbPath: string;
  /** USAGE_RETENTION_DAYS (issue 26): 0 = the usage ledger is off; absent = 30. */
  usageRetentionDays?: number;
  maxBodyBytes: number;
  clientBufferBytes: number;
  tickMs: number;
  /** Peers whose X-Forwarded-For names the client (TRUSTED_PROXIES). */
  trustedProxies: TrustedProxies;
  /** A request body must arrive in full within this (BODY_TIMEOUT_SECS). */
  bodyTimeoutMs: number;
  /** Open client connections before new ones get 503 (MAX_CONNECTIONS). */
  maxConnections: number;
  core: CoreConfig;
  /** Spec 004 governance (lifecycle routes); absent = key path unset. */
  opTokenKeyPath?: string;
  opTokenSigners?: string[];
  opTokenMinSigners?: number;
  /** Issue 26: OTEL_EXPORTER_OTLP_ENDPOINT ("" or absent = no span export) and OTEL_SERVICE_NAME. */
  otlpEndpoint?: string;
  otelServiceName?: string;
  /** Bearer token for /metrics besides the admin token; absent = none. */
  metricsToken?: string;
  /** ENABLE_METRICS (spec 004, issue 32); absent = true. */
  enableMetrics?: boolean;
  /** METRICS_PORT: a second listener for /metrics (0 = any free port); absent = none. */
  metricsPort?: number;
  /** CORS for /v1/*: ["*"] or exact origins; absent = ["*"]. */
  corsAllowOrigins?: string[];
  /** FORWARD_PATH_PREFIXES (issue 25): paths outside /v1/ forwarded to workers. */
  forwardPathPrefixes?: string[];
  /** Issue 16: the shared log's engine; absent = single instance, nothing loaded. */
  clusterUrl?: string;
  clusterPrefix?: string;
  /** Issue 23: silence before the log is declared lost (CLUSTER_LOG_TIMEOUT_MS). */
  clusterLogTimeoutMs?: number;
  /** Issue 23: the direct data path's address and secret, the log's hold limit. */
  clusterAdvertiseUrl?: string;
  clusterSecret?: string;
  clusterLogLostMs?: number;
};

/** CORS_ALLOW_ORIGINS: `*`, or origins exactly as browsers send them (scheme://host[:port]). */
export function parseCorsOrigins(raw: string): string[] {
  const list = raw.split(",").map((x) => x.trim()).filter((x) => x !== "");
  if (list.length === 0 || list.includes("*")) return ["*"];
  for (const o of list) {
    let origin: string | null = null;
    try {
      origin = new URL(o).origin;
    } catch {
      // reported below
    }
    if (origin !== o) {
      throw new OptionError(
        `CORS_ALLOW_ORIGINS (--cors-allow-origins) must be * or origins like https://app.example.com (scheme, host, optional port, no path or trailing slash), got "${o}"`,
      );
    }
  }
  return list;
}

export function serverHelp(): string {
  return helpText(
    "modelrelay server: one OpenAI + Anthropic endpoint in front of your GPU workers",
    "deno task server [options]",
    SERVER_OPTIONS,
  );
}

export function parseListenAddr(
  addr: string,
): { hostname: string; port: number } {
  const m = /^\[?([^\]]*?)\]?:(\d{1,5})$/.exec(addr);
  if (m === null || Number(m[2]) > 65535) {
    throw new OptionError(
      `LISTEN_ADDR (--listen-addr) must look like 127.0.0.1:8080, got "${addr}"`,
    );
  }
  return { hostname: m[1] === "" ? "0.0.0.0" : m[1]!, port: Number(m[2]) };
}

const RATE = /^(\d+)\s*req\/(s|sec|second|m|min|minute|h|hour)$/i;

/** Parses `100req/min` (spec 004) into a limit and window. */
export function parseRateLimit(name: string, raw: string): RateLimit {
  const m = RATE.exec(raw.trim());
  if (m === null || Number(m[1]) < 1) {
    throw new OptionError(
      `${name} must look like 100req/min (or req/s, req/hour), got "${raw}"`,
    );
  }
  const unit = m[2]!.toLowerCase()[0];
  const windowMs = unit === "s" ? 1000 : unit === "m" ? 60_000 : 3_600_000;
  return { limit: Number(m[1]), windowMs };
}

const TOKENS = /^(\d+)\s*tok\/(s|sec|second|m|min|minute|h|hour)$/i;
const BUDGET = /^(\d+)\s*tok\/(h|hour|d|day|month)$/i;
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/**
 * Parses a rate limit with its optional token part (issue 26):
 * `100req/min`, `20000tok/min` or both, comma-separated.
 */
export function parseRateSpec(
  name: string,
  raw: string,
): { req: RateLimit | null; tok: TokenLimit | null } {
  let req: RateLimit | null = null;
  let tok: TokenLimit | null = null;
  const wrong = () =>
    new OptionError(
      `${name} must look like 100req/min, 20000tok/min or 100req/min,20000tok/min (req or tok per s, min or hour), got "${raw}"`,
    );
  for (const part of raw.split(",").map((p) => p.trim())) {
    const m = TOKENS.exec(part);
    if (m !== null && Number(m[1]) >= 1 && tok === null) {
      const unit = m[2]!.toLowerCase()[0];
      const windowMs = unit === "s" ? 1000 : unit === "m" ? 60_000 : HOUR_MS;
      tok = { tokens: Number(m[1]), windowMs };
    } else if (RATE.test(part) && req === null) {
      req = parseRateLimit(name, part);
    } else throw wrong();
  }
  return { req, tok };
}

/** Parses a token budget (issue 26): `5000000tok/day`, or tok/hour, tok/month (30 days). */
export function parseTokenBudget(name: string, raw: string): TokenLimit {
  const m = BUDGET.exec(raw.trim());
  if (m === null || Number(m[1]) < 1) {
    throw new OptionError(
      `${name} must look like 5000000tok/day (or tok/hour, tok/month), got "${raw}"`,
    );
  }
  const unit = m[2]!.toLowerCase();
  const windowMs = unit[0] === "h"
    ? HOUR_MS
    : unit === "month"
    ? 30 * DAY_MS
    : DAY_MS;
  return { tokens: Number(m[1]), windowMs };
}

const TENANT_LIMIT_PREFIX = "TENANT_RATE_LIMIT_";
const TENANT_BUDGET_PREFIX = "TENANT_TOKEN_BUDGET_";

export function loadServerConfig(
  args: string[],
  env: (name: string) => string | undefined,
  allEnv: Record<string, string> = {},
): { config: ServerConfig; help: false } | { help: true } {
  const { values, help } = readOptions(
    args,
    withRustLog(env),
    SERVER_OPTIONS,
  );
  if (help) return { help: true };
  // Checked in this order: the first invalid setting is the one reported.
  const workerSecret = requiredSecret(values);
  const { logLevel, logFormat } = logSettings(values);
  const provider = providerName(values);
  const { hostname, port } = parseListenAddr(str(values, "listen-addr"));
  const limits = tenantRateLimits(values, allEnv);
  const queueLenMax = zeroIsUnlimited(int(values, "max-queue-len"));
  const tenantQueueLenMax = tenantQueueLen(values, queueLenMax);
  const { opTokenSigners, opTokenMinSigners } = opTokenSigning(values);
  const trustedProxies = trustedProxiesOf(values);
  const maxConnections = maxConnectionsSetting(values);
  const core = coreConfigOf(values, {
    provider,
    queueTimeoutMs: queueTimeoutMsOf(args, values, env),
    queueLenMax,
    tenantQueueLenMax,
    ...limits,
  });
  return {
    help: false,
    config: {
      hostname,
      port,
      workerSecret,
      logLevel,
      logFormat,
      adminToken: str(values, "admin-token"),
      requireApiKeys: bool(values, "require-api-keys"),
      apiKeysAsWorkerSecret: bool(values, "api-keys-as-worker-secret"),
      dbPath: str(values, "db-path"),
      usageRetentionDays: usageRetentionDays(values),
      maxBodyBytes: int(values, "max-body-bytes"),
      clientBufferBytes: int(values, "client-buffer-bytes"),
      tickMs: int(values, "tick-ms"),
      trustedProxies,
      bodyTimeoutMs: int(values, "body-timeout-secs") * 1000,
      maxConnections: maxConnections === "auto"
        ? defaultMaxConnections()
        : maxConnections,
      core,
      opTokenKeyPath: str(values, "verified-op-token-key-path"),
      opTokenSigners,
      opTokenMinSigners,
      metricsToken: str(values, "metrics-token"),
      enableMetrics: bool(values, "enable-metrics"),
      ...metricsPortOf(values),
      otlpEndpoint: str(values, "otel-exporter-otlp-endpoint"),
      otelServiceName: str(values, "otel-service-name"),
      corsAllowOrigins: parseCorsOrigins(str(values, "cors-allow-origins")),
      forwardPathPrefixes: parseForwardPrefixes(
        str(values, "forward-path-prefixes"),
      ),
      ...(str(values, "cluster-url") === "" ? {} : {
        clusterUrl: str(values, "cluster-url"),
        clusterPrefix: str(values, "cluster-prefix"),
        clusterLogTimeoutMs: int(values, "cluster-log-timeout-ms"),
        clusterLogLostMs: int(values, "cluster-log-lost-ms"),
        ...(str(values, "cluster-advertise-url") === ""
          ? {}
          : { clusterAdvertiseUrl: str(values, "cluster-advertise-url") }),
        ...clusterSecretOf(values),
      }),
    },
  };
}

/**
 * The original's `0` for a timeout is "no timeout" (issue 32). The core has no
 * "off": a zero becomes a limit no process lives to reach (ten years), so its
 * arithmetic and invariants stay as they are.
 */
export const NO_TIMEOUT_MS = 10 * 365 * 24 * 3_600_000;
/** The original's `MAX_QUEUE_LEN=0` is "unlimited": as many as a queue can hold. */
export const UNLIMITED_QUEUE_LEN = 2 ** 31 - 1;

function zeroIsNone(ms: number): number {
  return ms === 0 ? NO_TIMEOUT_MS : ms;
}

function zeroIsUnlimited(n: number): number {
  return n === 0 ? UNLIMITED_QUEUE_LEN : n;
}

/**
 * QUEUE_TIMEOUT_SECS (flag or environment), else spec 004's QUEUE_TIMEOUT_MS,
 * else the default; in milliseconds, 0 meaning none.
 */
function queueTimeoutMsOf(
  args: string[],
  values: OptionValues,
  env: (name: string) => string | undefined,
): number {
  const secsGiven = env("QUEUE_TIMEOUT_SECS") !== undefined ||
    canonicalArgs(args, SERVER_OPTIONS).some((a) =>
      /^--queue-timeout-secs(=|$)/.test(a)
    );
  const ms = env("QUEUE_TIMEOUT_MS")?.trim();
  if (secsGiven || ms === undefined) {
    return int(values, "queue-timeout-secs") * 1000;
  }
  if (!/^\d+$/.test(ms)) {
    throw new OptionError(
      `QUEUE_TIMEOUT_MS must be a whole number of milliseconds (0 = none), got "${ms}"`,
    );
  }
  return Number(ms);
}

/** METRICS_PORT (spec 004): a port number, 0 for any free one; unset = no second listener. */
function metricsPortOf(values: OptionValues): { metricsPort?: number } {
  const raw = str(values, "metrics-port");
  if (raw === "") return {};
  if (!/^\d{1,5}$/.test(raw) || Number(raw) > 65535) {
    throw new OptionError(
      `METRICS_PORT (--metrics-port) must be a port number (0-65535), got "${raw}"`,
    );
  }
  return { metricsPort: Number(raw) };
}

/** CLUSTER_SECRET, when set (issue 23). */
function clusterSecretOf(values: OptionValues): { clusterSecret?: string } {
  const v = values["cluster-secret"];
  return typeof v === "string" && v !== "" ? { clusterSecret: v } : {};
}

function requiredSecret(values: OptionValues): string {
  const secret = values["worker-secret"];
  if (secret === null || secret === undefined || secret === "") {
    throw new OptionError(
      "WORKER_SECRET is required: set it (or --worker-secret) to the secret your workers will use",
    );
  }
  return secret;
}

function providerName(values: OptionValues): string {
  const provider = str(values, "provider-name");
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(provider)) {
    throw new OptionError(
      `PROVIDER_NAME must be 1-64 of A-Z a-z 0-9 . _ -, got "${provider}"`,
    );
  }
  return provider;
}

/** `TENANT_RATE_LIMIT_<tenant>` variables, then DEFAULT_RATE_LIMIT, which wins over `..._default`. */
function tenantRateLimits(
  values: OptionValues,
  allEnv: Record<string, string>,
): TenantLimits {
  const l = noTenantLimits();
  const setRate = (tenant: string | null, name: string, raw: string) => {
    const { req, tok } = parseRateSpec(name, raw);
    if (tenant === null) {
      l.defaultRateLimit = req;
      l.defaultTokenRateLimit = tok;
      return;
    }
    if (req !== null) l.rateLimits[tenant] = req;
    if (tok !== null) l.tokenRateLimits[tenant] = tok;
  };
  // Sorted by name (issue 33): the environment's order is not the same from one
  // process to the next (Deno hands it over as a hash map), and the tenant
  // tables' key order is part of the core settings every cluster instance
  // must share exactly (the join gate digests them; replicas iterate them).
  for (const [name, raw] of envInNameOrder(allEnv)) {
    if (raw.trim() === "") continue;
    if (name.startsWith(TENANT_LIMIT_PREFIX)) {
      const tenant = name.slice(TENANT_LIMIT_PREFIX.length);
      // The spec's example sets the default as TENANT_RATE_LIMIT_default.
      setRate(tenant === "default" ? null : tenant, name, raw);
    } else if (name.startsWith(TENANT_BUDGET_PREFIX)) {
      const tenant = name.slice(TENANT_BUDGET_PREFIX.length);
      const budget = parseTokenBudget(name, raw);
      if (tenant === "default") l.defaultTokenBudget = budget;
      else l.tokenBudgets[tenant] = budget;
    }
  }
  const defaultRaw = str(values, "default-rate-limit");
  if (defaultRaw !== "") setRate(null, "DEFAULT_RATE_LIMIT", defaultRaw);
  const budgetRaw = str(values, "default-token-budget");
  if (budgetRaw !== "") {
    l.defaultTokenBudget = parseTokenBudget("DEFAULT_TOKEN_BUDGET", budgetRaw);
  }
  return l;
}

/** The environment's entries sorted by name: the same settings give the same order. */
export function envInNameOrder(
  allEnv: Record<string, string>,
): [string, string][] {
  return Object.entries(allEnv).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0);
}

/** USAGE_RETENTION_DAYS: a whole number of days, 0 turning the ledger off. */
function usageRetentionDays(values: OptionValues): number {
  const raw = str(values, "usage-retention-days").trim();
  if (!/^\d{1,5}$/.test(raw)) {
    throw new OptionError(
      `USAGE_RETENTION_DAYS (--usage-retention-days) must be a whole number of days (0 = no usage ledger), got "${raw}"`,
    );
  }
  return Number(raw);
}

/** TENANT_MAX_QUEUE_LEN, defaulting to the whole queue's bound. */
function tenantQueueLen(values: OptionValues, queueLenMax: number): number {
  const raw = str(values, "tenant-max-queue-len");
  if (raw !== "" && !/^[1-9]\d*$/.test(raw)) {
    throw new OptionError(
      `TENANT_MAX_QUEUE_LEN (--tenant-max-queue-len) must be a whole number >= 1, got "${raw}"`,
    );
  }
  return raw === "" ? queueLenMax : Number(raw);
}

/** TENANT_MAX_BUFFERED_RESPONSE_BYTES; null = half the fleet's budget (core/state/body_budget.ts). */
function tenantBufferBytes(values: OptionValues): number | null {
  const raw = str(values, "tenant-max-buffered-response-bytes");
  if (raw !== "" && !/^[1-9]\d*$/.test(raw)) {
    throw new OptionError(
      `TENANT_MAX_BUFFERED_RESPONSE_BYTES (--tenant-max-buffered-response-bytes) must be a whole number >= 1, got "${raw}"`,
    );
  }
  return raw === "" ? null : Number(raw);
}

function opTokenSigning(
  values: OptionValues,
): { opTokenSigners: string[]; opTokenMinSigners: number } {
  const opTokenSigners = str(values, "op-token-signers").split(",").map((x) =>
    x.trim()
  ).filter((x) => x !== "");
  const opTokenMinSigners = int(values, "op-token-min-signers");
  if (opTokenSigners.length > 0 && opTokenMinSigners > opTokenSigners.length) {
    throw new OptionError(
      `OP_TOKEN_MIN_SIGNERS (${opTokenMinSigners}) exceeds the ${opTokenSigners.length} signer(s) in OP_TOKEN_SIGNERS: no token could ever pass`,
    );
  }
  return { opTokenSigners, opTokenMinSigners };
}

function trustedProxiesOf(values: OptionValues): TrustedProxies {
  try {
    return parseTrustedProxies(str(values, "trusted-proxies"));
  } catch (e) {
    throw new OptionError(
      `TRUSTED_PROXIES (--trusted-proxies): ${(e as Error).message}`,
    );
  }
}

/** MAX_CONNECTIONS: `auto` is resolved from the open-file limit by the caller. */
function maxConnectionsSetting(values: OptionValues): "auto" | number {
  const raw = str(values, "max-connections").trim();
  if (raw !== "auto" && !/^[1-9]\d*$/.test(raw)) {
    throw new OptionError(
      `MAX_CONNECTIONS (--max-connections) must be auto or a whole number >= 1, got "${raw}"`,
    );
  }
  return raw === "auto" ? "auto" : Number(raw);
}

/** The core's settings: what the reducer decides with (and the cluster's version gate digests). */
function coreConfigOf(
  values: OptionValues,
  o: TenantLimits & {
    provider: string;
    queueTimeoutMs: number;
    queueLenMax: number;
    tenantQueueLenMax: number;
  },
): CoreConfig {
  return makeConfig({
    providers: [{ name: o.provider, enabled: true }],
    defaultProvider: o.provider,
    queueLenMax: o.queueLenMax,
    tenantQueueLenMax: o.tenantQueueLenMax,
    rateLimits: o.rateLimits,
    defaultRateLimit: o.defaultRateLimit,
    tokenRateLimits: o.tokenRateLimits,
    defaultTokenRateLimit: o.defaultTokenRateLimit,
    tokenBudgets: o.tokenBudgets,
    defaultTokenBudget: o.defaultTokenBudget,
    affinityLoadMargin: int(values, "affinity-load-margin"),
    queueTimeoutMs: zeroIsNone(o.queueTimeoutMs),
    requestTimeoutMs: zeroIsNone(int(values, "request-timeout-secs") * 1000),
    drainTimeoutMs: int(values, "drain-timeout-secs") * 1000,
    streamCharsMax: int(values, "max-stream-bytes"),
    responseBodyCharsMax: int(values, "max-response-body-bytes"),
    responseBufferBytesMax: int(values, "max-buffered-response-bytes"),
    tenantResponseBufferBytesMax: tenantBufferBytes(values),
    clientWriteTimeoutMs: int(values, "client-write-timeout-secs") * 1000,
    modelGraceMs: int(values, "model-grace-secs") * 1000,
    sseKeepAliveMs: int(values, "sse-keepalive-secs") * 1000,
    modelDrainMax: int(values, "model-drain-max"),
    heartbeatIntervalMs: int(values, "heartbeat-interval-secs") * 1000,
    heartbeatTimeoutMs: int(values, "heartbeat-timeout-secs") * 1000,
    requireProtocolVersion: bool(values, "require-protocol-version"),
    registerTimeoutMs: int(values, "register-timeout-secs") * 1000,
    modelAliases: parseModelAliases(str(values, "model-aliases")),
    multiTenant: bool(values, "enable-multi-tenant"),
  });
}

/** MODEL_ALIASES: `alias=model` pairs, comma-separated (issue 25). */
export function parseModelAliases(raw: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of raw.split(",")) {
    if (pair.trim() === "") continue;
    const eq = pair.indexOf("=");
    const alias = pair.slice(0, eq).trim();
    const target = pair.slice(eq + 1).trim();
    if (eq < 0 || alias === "" || target === "" || alias === target) {
      throw new OptionError(
        `MODEL_ALIASES (--model-aliases) must be alias=model pairs separated by commas, got "${pair.trim()}"`,
      );
    }
    if (Object.hasOwn(out, alias)) {
      throw new OptionError(
        `MODEL_ALIASES (--model-aliases) names alias "${alias}" twice`,
      );
    }
    out[alias] = target;
  }
  return out;
}

/** FORWARD_PATH_PREFIXES: absolute path prefixes, comma-separated (issue 25). */
export function parseForwardPrefixes(raw: string): string[] {
  const out: string[] = [];
  for (const item of raw.split(",")) {
    const p = item.trim();
    if (p === "") continue;
    if (!p.startsWith("/") || p === "/" || /[\s?#]/.test(p)) {
      throw new OptionError(
        `FORWARD_PATH_PREFIXES (--forward-path-prefixes) takes absolute path prefixes such as /tokenize (not / itself), got "${p}"`,
      );
    }
    out.push(p);
  }
  return out;
}
