import assert from "node:assert/strict";
import { OptionError } from "../options.ts";
import {
  connectUrlFor,
  parseWorkerConfig,
  type WorkerConfig,
  workerHelp,
} from "./config.ts";
import { ConfigFileError } from "./config_file.ts";

function parse(env: Record<string, string>, args: string[] = []) {
  return parseWorkerConfig(args, (n) => env[n], () => "gpu-box");
}

/** The fields of `config` that `expected` names hold what it says. */
function assertFields(
  config: WorkerConfig,
  expected: Partial<WorkerConfig>,
): void {
  const got = Object.fromEntries(
    Object.keys(expected).map((k) => [k, config[k as keyof WorkerConfig]]),
  );
  assert.deepEqual(got, expected);
}

Deno.test("config defaults follow the spec's quick reference", () => {
  assertFields(parse({ WORKER_SECRET: "s" })!, {
    proxyUrl: "http://127.0.0.1:8080",
    connectUrl: "ws://127.0.0.1:8080/v1/worker/connect?provider=local",
    backendUrl: "http://127.0.0.1:8000",
    workerName: "worker-gpu-box",
    models: null,
    maxConcurrent: 4,
    providerName: "local",
    logLevel: "info",
  });
});

Deno.test("config maps https to wss and flags win over the environment", () => {
  const c = parse(
    { WORKER_SECRET: "s", PROXY_URL: "http://ignored", MODELS: " a, ,b ,a" },
    ["--proxy-url", "https://relay.example.com/", "--provider-name", "gpu"],
  )!;
  assert.equal(
    c.connectUrl,
    "wss://relay.example.com/v1/worker/connect?provider=gpu",
  );
  assert.deepEqual(c.models, ["a", "b", "a"]);
});

Deno.test("config refuses to start without WORKER_SECRET", () => {
  assert.throws(
    () => parse({}),
    (e) => e instanceof OptionError && /WORKER_SECRET/.test(e.message),
  );
});

Deno.test("config reads the original's MAX_CONCURRENCY when MAX_CONCURRENT is unset", () => {
  assert.equal(
    parse({ WORKER_SECRET: "s", MAX_CONCURRENCY: "7" })!.maxConcurrent,
    7,
  );
  assert.equal(
    parse({ WORKER_SECRET: "s", MAX_CONCURRENT: "2", MAX_CONCURRENCY: "7" })!
      .maxConcurrent,
    2,
  );
});

Deno.test("LOG_FORMAT is read in any case, by the same rule as the server's", () => {
  assert.equal(
    parse({ WORKER_SECRET: "s", LOG_FORMAT: "JSON" })!.logFormat,
    "json",
  );
});

Deno.test("config rejects bad values with a one-line reason", () => {
  assert.throws(
    () => parse({ WORKER_SECRET: "s", MAX_CONCURRENT: "0" }),
    OptionError,
  );
  assert.throws(
    () => parse({ WORKER_SECRET: "s", LOG_FORMAT: "xml" }),
    OptionError,
  );
  assert.throws(
    () => parse({ WORKER_SECRET: "s", PROXY_URL: "ftp://x" }),
    OptionError,
  );
  assert.throws(() => connectUrlFor("proxy:8080", "local"), OptionError);
});

Deno.test("config returns null for --help", () => {
  assert.equal(parse({}, ["--help"]), null);
});

Deno.test("issue 14.7: ON_SERVER_SHUTDOWN defaults to reconnect; exit stays an option", () => {
  assert.equal(parse({ WORKER_SECRET: "s" })!.onServerShutdown, "reconnect");
  assert.equal(
    parse({ WORKER_SECRET: "s", ON_SERVER_SHUTDOWN: "exit" })!.onServerShutdown,
    "exit",
  );
});

Deno.test("issue 14.10: BACKEND_API_KEY is read from the environment or --backend-api-key; unset or empty is none", () => {
  assert.equal(parse({ WORKER_SECRET: "s" })!.backendApiKey, null);
  assert.equal(
    parse({ WORKER_SECRET: "s", BACKEND_API_KEY: "" })!.backendApiKey,
    null,
  );
  assert.equal(
    parse({ WORKER_SECRET: "s", BACKEND_API_KEY: "sk-env" })!.backendApiKey,
    "sk-env",
  );
  assert.equal(
    parse({ WORKER_SECRET: "s", BACKEND_API_KEY: "sk-env" }, [
      "--backend-api-key",
      "sk-flag",
    ])!.backendApiKey,
    "sk-flag",
  );
});

Deno.test("issue 24.7: BACKEND_HEAD_TIMEOUT_SECS defaults to 300 s, is read from env and flag, 0 turns it off", () => {
  assert.equal(parse({ WORKER_SECRET: "s" })!.backendHeadTimeoutSecs, 300);
  assert.equal(
    parse({ WORKER_SECRET: "s", BACKEND_HEAD_TIMEOUT_SECS: "0" })!
      .backendHeadTimeoutSecs,
    0,
  );
  assert.equal(
    parse({ WORKER_SECRET: "s", BACKEND_HEAD_TIMEOUT_SECS: "9" }, [
      "--backend-head-timeout-secs",
      "60",
    ])!.backendHeadTimeoutSecs,
    60,
  );
});

function parseWithFile(
  env: Record<string, string>,
  args: string[],
  files: Record<string, string>,
) {
  return parseWorkerConfig(args, (n) => env[n], () => "gpu-box", (p) => {
    const text = files[p];
    if (text === undefined) throw new Error(`No such file: ${p}`);
    return text;
  });
}

const WIZARD_FILE = [
  'proxy_url = "https://relay.example.com"',
  'provider = "gpu"',
  'worker_secret = "from-file"',
  'worker_name = "box-1"',
  'models = ["*"]',
  "max_concurrency = 3",
  'backend_url = "http://127.0.0.1:1234"',
  'log_level = "debug"',
].join("\n");

Deno.test('issue 32: --config reads every key of the original\'s worker file; models = ["*"] discovers', () => {
  const c = parseWithFile({}, ["--config", "w.toml"], {
    "w.toml": WIZARD_FILE,
  })!;
  assertFields(c, {
    connectUrl: "wss://relay.example.com/v1/worker/connect?provider=gpu",
    workerSecret: "from-file",
    workerName: "box-1",
    models: null,
    maxConcurrent: 3,
    backendUrl: "http://127.0.0.1:1234",
    logLevel: "debug",
    configWarnings: [],
  });
});

Deno.test("issue 32: flags and environment win over the config file, the file over defaults", () => {
  const c = parseWithFile(
    { WORKER_NAME: "env-name", MAX_CONCURRENCY: "5" },
    ["--config=w.toml", "--provider", "flag-provider", "--models", "a,b"],
    { "w.toml": WIZARD_FILE + "\nunknown_key = 1\nmodels_refresh_secs = 7" },
  )!;
  assert.equal(c.workerName, "env-name");
  assert.equal(c.maxConcurrent, 5);
  assert.equal(c.providerName, "flag-provider");
  assert.deepEqual(c.models, ["a", "b"]);
  assert.equal(c.workerSecret, "from-file");
  assert.equal(c.modelsRefreshSecs, 7);
  assert.equal(c.drainTimeoutSecs, 30);
  assert.deepEqual(c.configWarnings, [
    `config file 'w.toml': unknown key "unknown_key" ignored`,
  ]);
});

Deno.test("issue 32: a config file that cannot be read or parsed is a ConfigFileError naming it", () => {
  assert.throws(
    () => parseWithFile({}, ["--config", "missing.toml"], {}),
    (e) =>
      e instanceof ConfigFileError &&
      /^failed to read config file 'missing.toml': No such file/.test(
        e.message,
      ),
  );
  assert.throws(
    () => parseWithFile({}, ["--config", "bad.toml"], { "bad.toml": "a = " }),
    (e) =>
      e instanceof ConfigFileError &&
      /^failed to parse config file 'bad.toml': line 1/.test(e.message),
  );
  assert.throws(
    () =>
      parseWithFile({}, ["--config", "arr.toml"], {
        "arr.toml": 'worker_secret = ["a"]',
      }),
    (e) => e instanceof ConfigFileError && /one value/.test(e.message),
  );
});

Deno.test("issue 32: the original's flag names --provider and --max-concurrency; --help lists both names", () => {
  const c = parse({ WORKER_SECRET: "s" }, [
    "--provider=p2",
    "--max-concurrency",
    "6",
  ])!;
  assert.equal(c.providerName, "p2");
  assert.equal(c.maxConcurrent, 6);
  const help = workerHelp();
  assert.match(help, /--provider-name, --provider /);
  assert.match(help, /--max-concurrent, --max-concurrency /);
  assert.match(help, /MAX_CONCURRENT, MAX_CONCURRENCY/);
  assert.match(help, /--config +\(flag only\)/);
});

Deno.test("issue 32: RUST_LOG overrides LOG_LEVEL (and the file); its directive form is mapped; --log-level wins", () => {
  assert.equal(
    parse({ WORKER_SECRET: "s", LOG_LEVEL: "warn", RUST_LOG: "debug" })!
      .logLevel,
    "debug",
  );
  assert.equal(
    parse({
      WORKER_SECRET: "s",
      LOG_LEVEL: "warn",
      RUST_LOG: "info,hyper=warn,modelrelay_worker=trace",
    })!.logLevel,
    "trace",
  );
  assert.equal(
    parse({ WORKER_SECRET: "s", LOG_LEVEL: "warn", RUST_LOG: "nonsense" })!
      .logLevel,
    "warn",
  );
  assert.equal(
    parse({ WORKER_SECRET: "s", RUST_LOG: "off" })!.logLevel,
    "error",
  );
  assert.equal(
    parse({ WORKER_SECRET: "s", LOG_LEVEL: "modelrelay_worker=debug" })!
      .logLevel,
    "debug",
  );
  assert.equal(
    parse({ WORKER_SECRET: "s", RUST_LOG: "debug" }, ["--log-level", "error"])!
      .logLevel,
    "error",
  );
  assert.equal(
    parseWithFile({ RUST_LOG: "trace" }, ["--config", "w.toml"], {
      "w.toml": WIZARD_FILE,
    })!.logLevel,
    "trace",
  );
});

Deno.test("issue 30: AUTO_LOAD is off by default, on with on (or true), and refuses anything else", () => {
  assert.equal(parse({ WORKER_SECRET: "s" })!.autoLoad, false);
  assert.equal(parse({ WORKER_SECRET: "s", AUTO_LOAD: "on" })!.autoLoad, true);
  assert.equal(
    parse({ WORKER_SECRET: "s" }, ["--auto-load", "true"])!.autoLoad,
    true,
  );
  assert.equal(
    parse({ WORKER_SECRET: "s", AUTO_LOAD: "off" })!.autoLoad,
    false,
  );
  assert.throws(
    () => parse({ WORKER_SECRET: "s", AUTO_LOAD: "sometimes" }),
    (e) => e instanceof OptionError && /AUTO_LOAD .*on or off/.test(e.message),
  );
});
