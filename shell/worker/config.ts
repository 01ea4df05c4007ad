// Worker configuration: the original's env names and defaults (spec, Configuration
// Quick Reference) plus ours, each also settable by flag (flags win).
import {
  LOG_OPTIONS,
  type LogSettings,
  logSettings,
  withRustLog,
} from "../log.ts";
import {
  helpText,
  int,
  OptionError,
  type OptionSpec,
  readOptions,
  str,
} from "../options.ts";
import { configFileValues } from "./config_file.ts";

export type OnServerShutdown = "exit" | "reconnect";

export type WorkerConfig = LogSettings & {
  proxyUrl: string;
  /** ws(s)://…/v1/worker/connect?provider=NAME, derived from proxyUrl. */
  connectUrl: string;
  workerSecret: string;
  workerName: string;
  backendUrl: string;
  /** Sent to the backend as `Authorization: Bearer`; null = none. Never logged. */
  backendApiKey: string | null;
  /** null: discover from the backend's GET /v1/models. */
  models: string[] | null;
  maxConcurrent: number;
  providerName: string;
  drainTimeoutSecs: number;
  modelsRefreshSecs: number;
  onServerShutdown: OnServerShutdown;
  /** ENDPOINT_PREFIXES (issue 25): the paths this worker serves; empty or absent = every path. */
  endpointPrefixes?: string[];
  /** Longest wait for a backend's response head, in seconds (0 = none; C63). */
  backendHeadTimeoutSecs: number;
  /** What the --config file held that this worker does not read (logged at start). */
  configWarnings?: string[];
  /** MAX_RESIDENT_MODELS (issue 30): models the backend holds at once; null = what it reports. */
  maxResidentModels: number | null;
  /** AUTO_LOAD (issue 30). */
  autoLoad: boolean;
};

export const WORKER_OPTIONS: OptionSpec[] = [
  {
    flag: "config",
    env: "",
    kind: "string",
    default: "",
    help:
      "TOML file of settings (the original's: proxy_url, provider, worker_secret, worker_name, models, max_concurrency, backend_url, log_level; or any option here, - as _); flags and environment win over it",
  },
  {
    flag: "proxy-url",
    env: "PROXY_URL",
    kind: "string",
    default: "http://127.0.0.1:8080",
    help: "proxy base URL; http -> ws, https -> wss",
  },
  {
    flag: "worker-secret",
    env: "WORKER_SECRET",
    kind: "secret",
    default: null,
    help: "shared secret, sent as X-Worker-Secret",
  },
  {
    flag: "worker-name",
    env: "WORKER_NAME",
    kind: "string",
    default: "",
    help: "human-readable name (default worker-<hostname>)",
  },
  {
    flag: "backend-url",
    env: "BACKEND_URL",
    kind: "string",
    default: "http://127.0.0.1:8000",
    help: "local model server (llama-server, vLLM, Ollama, …)",
  },
  {
    flag: "backend-api-key",
    env: "BACKEND_API_KEY",
    kind: "secret",
    default: "",
    help:
      "key the backend requires, sent as Authorization: Bearer on every backend call (replaces the client's); never logged",
  },
  {
    flag: "models",
    env: "MODELS",
    kind: "string",
    default: "",
    help:
      "comma-separated models; unset or * = discover from BACKEND_URL/v1/models",
  },
  {
    flag: "max-concurrent",
    env: "MAX_CONCURRENT",
    kind: "int",
    default: "4",
    min: 1,
    help: "requests handled at once",
    aliases: ["max-concurrency"],
    envAliases: ["MAX_CONCURRENCY"],
  },
  {
    flag: "provider-name",
    env: "PROVIDER_NAME",
    kind: "string",
    default: "local",
    help: "provider to register with",
    aliases: ["provider"],
  },
  ...LOG_OPTIONS,
  {
    flag: "drain-timeout-secs",
    env: "DRAIN_TIMEOUT_SECS",
    kind: "int",
    default: "30",
    min: 0,
    help: "on SIGTERM/SIGINT, longest wait for in-flight requests",
  },
  {
    flag: "models-refresh-secs",
    env: "MODELS_REFRESH_SECS",
    kind: "int",
    default: "60",
    min: 0,
    help: "re-list discovered models this often (0 = never)",
  },
  {
    flag: "backend-head-timeout-secs",
    env: "BACKEND_HEAD_TIMEOUT_SECS",
    kind: "int",
    default: "300",
    min: 0,
    help:
      "longest wait for the backend's response head (a non-streaming answer's comes when it is done); then the request fails as backend_unavailable and its slot is freed (0 = no limit)",
  },
  {
    flag: "on-server-shutdown",
    env: "ON_SERVER_SHUTDOWN",
    kind: "string",
    default: "reconnect",
    help:
      "after the proxy's graceful_shutdown: reconnect (with backoff, for a restart) or exit",
  },
  {
    flag: "endpoint-prefixes",
    env: "ENDPOINT_PREFIXES",
    kind: "string",
    default: "",
    help:
      "comma-separated path prefixes this worker serves, e.g. /v1/embeddings,/v1/rerank (empty = every path)",
  },
  {
    flag: "max-resident-models",
    env: "MAX_RESIDENT_MODELS",
    kind: "string",
    default: "",
    help:
      "models the backend holds in memory at once, reported to the proxy for routing (empty = what the backend reports, else 1 for a backend that swaps models)",
  },
  {
    flag: "auto-load",
    env: "AUTO_LOAD",
    kind: "string",
    default: "off",
    help:
      "on: a request for a model the backend must be asked to load (llama-server router with --no-models-autoload, spec 004 runner) loads it first, unloading the least recently used idle model when there is no room; off: forwarded as is",
  },
];

/** AUTO_LOAD: on or off (true/false, yes/no, 1/0 as well). */
export function parseAutoLoad(raw: string): boolean {
  const t = raw.trim().toLowerCase();
  if (["on", "true", "yes", "1"].includes(t)) return true;
  if (["off", "false", "no", "0", ""].includes(t)) return false;
  throw new OptionError(
    `AUTO_LOAD (--auto-load) must be on or off, got "${raw}"`,
  );
}

/** MAX_RESIDENT_MODELS: empty = null (the backend's own figure), else a whole number >= 1. */
export function parseMaxResidentModels(raw: string): number | null {
  const t = raw.trim();
  if (t === "") return null;
  if (!/^[0-9]+$/.test(t) || Number(t) < 1 || Number(t) > 0xffff) {
    throw new OptionError(
      `MAX_RESIDENT_MODELS (--max-resident-models) must be a whole number from 1 to 65535, or empty, got "${raw}"`,
    );
  }
  return Number(t);
}

export function workerHelp(): string {
  return helpText(
    "modelrelay worker: connects out to the proxy and forwards requests to a local backend",
    "deno task worker [options]",
    WORKER_OPTIONS,
  );
}

/** ws(s) URL of the proxy's worker endpoint. */
export function connectUrlFor(proxyUrl: string, provider: string): string {
  const base = proxyUrl.trim().replace(/\/+$/, "");
  const ws = base.replace(/^http:\/\//i, "ws://").replace(
    /^https:\/\//i,
    "wss://",
  );
  if (!/^wss?:\/\//i.test(ws)) {
    throw new OptionError(
      `PROXY_URL (--proxy-url) must start with http:// or https://, got "${proxyUrl}"`,
    );
  }
  return `${ws}/v1/worker/connect?provider=${encodeURIComponent(provider)}`;
}

export function parseModels(raw: string): string[] {
  return raw.split(",").map((m) => m.trim()).filter((m) => m !== "");
}

/**
 * Reads flags, then environment, then the --config file, then defaults.
 * Returns null when --help was asked; throws OptionError with a one-line
 * reason on invalid input, ConfigFileError when the file cannot be used.
 */
export function parseWorkerConfig(
  args: string[],
  env: (name: string) => string | undefined,
  hostname: () => string,
  readFile: (path: string) => string = (p) => Deno.readTextFileSync(p),
): WorkerConfig | null {
  // An empty variable counts as unset (`MODELS=` in a unit file means "discover").
  const get = withRustLog((name: string) => {
    const v = env(name);
    return v === undefined || v.trim() === "" ? undefined : v;
  });
  const first = readOptions(args, get, WORKER_OPTIONS);
  if (first.help) return null;
  const path = str(first.values, "config");
  const file = path === ""
    ? { values: {}, warnings: [] }
    : configFileValues(path, readFile, WORKER_OPTIONS);
  const { values } = readOptions(
    args,
    get,
    WORKER_OPTIONS,
    (flag) => file.values[flag],
  );
  const secret = values["worker-secret"];
  if (secret === null || secret === undefined || secret === "") {
    throw new OptionError(
      "WORKER_SECRET (--worker-secret) is required: set it to the proxy's worker secret",
    );
  }
  const { logLevel, logFormat } = logSettings(values);
  const onServerShutdown = str(values, "on-server-shutdown");
  if (onServerShutdown !== "exit" && onServerShutdown !== "reconnect") {
    throw new OptionError(
      `ON_SERVER_SHUTDOWN must be exit or reconnect, got "${onServerShutdown}"`,
    );
  }
  const backendUrl = str(values, "backend-url").replace(/\/+$/, "");
  if (!/^https?:\/\//i.test(backendUrl)) {
    throw new OptionError(
      `BACKEND_URL (--backend-url) must start with http:// or https://, got "${backendUrl}"`,
    );
  }
  const providerName = str(values, "provider-name");
  const models = parseModels(str(values, "models"));
  return {
    proxyUrl: str(values, "proxy-url"),
    connectUrl: connectUrlFor(str(values, "proxy-url"), providerName),
    workerSecret: secret,
    workerName: str(values, "worker-name") || defaultName(hostname),
    backendUrl,
    backendApiKey: str(values, "backend-api-key") || null,
    // `*` (the wizard's `models = ["*"]`) asks the backend, as the original does.
    models: models.length > 0 && !models.includes("*") ? models : null,
    maxConcurrent: int(values, "max-concurrent"),
    providerName,
    logLevel,
    logFormat,
    drainTimeoutSecs: int(values, "drain-timeout-secs"),
    modelsRefreshSecs: int(values, "models-refresh-secs"),
    onServerShutdown,
    endpointPrefixes: parseModels(str(values, "endpoint-prefixes")),
    backendHeadTimeoutSecs: int(values, "backend-head-timeout-secs"),
    configWarnings: file.warnings,
    maxResidentModels: parseMaxResidentModels(
      str(values, "max-resident-models"),
    ),
    autoLoad: parseAutoLoad(str(values, "auto-load")),
  };
}

function defaultName(hostname: () => string): string {
  try {
    return `worker-${hostname()}`;
  } catch {
    return "worker"; // No --allow-sys=hostname, or no hostname: the spec's default.
  }
}
