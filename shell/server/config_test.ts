// Issue 32: the original's command line and zero values, spec 004's names.
import assert from "node:assert/strict";
import { OptionError } from "../options.ts";
import {
  loadServerConfig,
  NO_TIMEOUT_MS,
  type ServerConfig,
  serverHelp,
  UNLIMITED_QUEUE_LEN,
} from "./config.ts";
import { originalServerArgs } from "./_original_args.ts";

function load(args: string[], env: Record<string, string> = {}): ServerConfig {
  const loaded = loadServerConfig(args, (n) => env[n], env);
  if (loaded.help) throw new Error("help");
  return loaded.config;
}

Deno.test("issue 32: the original's server command line starts, verbatim", () => {
  const c = load(originalServerArgs("127.0.0.1:9123", "S", "T"));
  assert.equal(c.hostname, "127.0.0.1");
  assert.equal(c.port, 9123);
  assert.equal(c.core.defaultProvider, "local");
  assert.equal(c.adminToken, "T");
  assert.equal(c.requireApiKeys, true);
  // 0 is the original's "unlimited" and "no timeout".
  assert.equal(c.core.queueLenMax, UNLIMITED_QUEUE_LEN);
  assert.equal(c.core.queueTimeoutMs, NO_TIMEOUT_MS);
  assert.equal(c.core.requestTimeoutMs, NO_TIMEOUT_MS);
});

Deno.test("issue 32: a boolean flag takes a bare form, true and false, before another flag or at the end", () => {
  const base = ["--worker-secret", "S"];
  assert.equal(load([...base, "--require-api-keys"]).requireApiKeys, true);
  assert.equal(
    load(["--require-api-keys", ...base]).requireApiKeys,
    true,
  );
  assert.equal(
    load([...base, "--require-api-keys", "false"]).requireApiKeys,
    false,
  );
  assert.equal(
    load([...base, "--require-api-keys=true"]).requireApiKeys,
    true,
  );
  assert.equal(
    load([...base, "--require-protocol-version"]).core.requireProtocolVersion,
    true,
  );
  assert.throws(
    () => load([...base, "--require-api-keys", "maybe"]),
    OptionError,
  );
});

Deno.test("issue 32: our flag names still work and the original's aliases are listed beside them in --help", () => {
  const c = load([
    "--listen-addr=127.0.0.1:9124",
    "--provider-name",
    "p",
    "--worker-secret",
    "S",
    "--queue-timeout-secs",
    "7",
    "--request-timeout-secs",
    "8",
  ]);
  assert.equal(c.port, 9124);
  assert.equal(c.core.defaultProvider, "p");
  assert.equal(c.core.queueTimeoutMs, 7000);
  assert.equal(c.core.requestTimeoutMs, 8000);
  const help = serverHelp();
  for (
    const names of [
      "--listen-addr, --listen ",
      "--provider-name, --provider ",
      "--queue-timeout-secs, --queue-timeout ",
      "--request-timeout-secs, --request-timeout ",
      "MAX_QUEUE_LEN, MAX_QUEUE_DEPTH",
    ]
  ) assert.ok(help.includes(names), names);
  assert.match(help, /--require-api-keys .*\(bare flag = true\)/);
});

Deno.test("issue 32: zero values in the environment follow the original", () => {
  const c = load([], {
    WORKER_SECRET: "S",
    MAX_QUEUE_LEN: "0",
    QUEUE_TIMEOUT_SECS: "0",
    REQUEST_TIMEOUT_SECS: "0",
  });
  assert.equal(c.core.queueLenMax, UNLIMITED_QUEUE_LEN);
  assert.equal(c.core.tenantQueueLenMax, UNLIMITED_QUEUE_LEN);
  assert.equal(c.core.queueTimeoutMs, NO_TIMEOUT_MS);
  assert.equal(c.core.requestTimeoutMs, NO_TIMEOUT_MS);
});

Deno.test("issue 32: spec 004's MAX_QUEUE_DEPTH and QUEUE_TIMEOUT_MS are read when ours are unset", () => {
  const spec = load([], {
    WORKER_SECRET: "S",
    MAX_QUEUE_DEPTH: "16",
    QUEUE_TIMEOUT_MS: "1500",
  });
  assert.equal(spec.core.queueLenMax, 16);
  assert.equal(spec.core.queueTimeoutMs, 1500);
  const ours = load(["--queue-timeout", "3"], {
    WORKER_SECRET: "S",
    MAX_QUEUE_LEN: "5",
    MAX_QUEUE_DEPTH: "16",
    QUEUE_TIMEOUT_MS: "1500",
  });
  assert.equal(ours.core.queueLenMax, 5);
  assert.equal(ours.core.queueTimeoutMs, 3000);
  assert.equal(
    load([], { WORKER_SECRET: "S", QUEUE_TIMEOUT_MS: "0" }).core
      .queueTimeoutMs,
    NO_TIMEOUT_MS,
  );
  assert.throws(
    () => load([], { WORKER_SECRET: "S", QUEUE_TIMEOUT_MS: "30s" }),
    (e) => e instanceof OptionError && /QUEUE_TIMEOUT_MS/.test(e.message),
  );
});

Deno.test("issue 32: RUST_LOG overrides LOG_LEVEL on the server too", () => {
  assert.equal(
    load([], { WORKER_SECRET: "S", LOG_LEVEL: "error", RUST_LOG: "debug" })
      .logLevel,
    "debug",
  );
  assert.equal(
    load([], { WORKER_SECRET: "S", LOG_LEVEL: "modelrelay_server=warn" })
      .logLevel,
    "warn",
  );
});
