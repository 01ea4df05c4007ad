// `deno task server`: configuration from env and flags, then serve until SIGINT or
// SIGTERM, which drains gracefully (C30); a second signal exits at once.
import { makeLogger } from "../log.ts";
import { OptionError } from "../options.ts";
import { KeyStoreError } from "./ops/api_keys.ts";
import { loadServerConfig, serverHelp } from "./config.ts";
import { startRelay } from "./relay.ts";

async function main(): Promise<number> {
  let loaded;
  try {
    loaded = loadServerConfig(
      Deno.args,
      (name) => Deno.env.get(name),
      Deno.env.toObject(),
    );
  } catch (e) {
    if (e instanceof OptionError) {
      console.error(`modelrelay server: ${e.message}`);
      return 2;
    }
    throw e;
  }
  if (loaded.help) {
    console.log(serverHelp());
    return 0;
  }
  const config = loaded.config;
  const log = makeLogger(config.logLevel, config.logFormat, "server");
  let server;
  try {
    server = await startRelay(config, log);
  } catch (e) {
    // ClusterJoinError by name: its module is loaded only in cluster mode.
    if (
      e instanceof KeyStoreError || (e as Error)?.name === "ClusterJoinError"
    ) {
      console.error(`modelrelay server: ${(e as Error).message}`);
      return 1;
    }
    console.error(
      `modelrelay server: cannot listen on ${config.hostname}:${config.port}: ${e}`,
    );
    return 1;
  }
  let signalled = false;
  const done = new Promise<void>((resolve) => {
    const onSignal = () => {
      if (signalled) {
        log("warn", "second signal: exiting now");
        Deno.exit(1);
      }
      signalled = true;
      log("info", "graceful shutdown: finishing in-flight requests", {
        drain_timeout_secs: config.core.drainTimeoutMs / 1000,
      });
      server.shutdown().then(resolve);
    };
    Deno.addSignalListener("SIGINT", onSignal);
    Deno.addSignalListener("SIGTERM", onSignal);
  });
  await done;
  log("info", "server stopped");
  return 0;
}

Deno.exit(await main());
