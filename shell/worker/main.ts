// Entry for `deno task worker`: read the configuration, learn the models, connect
// out to the proxy, and turn SIGTERM/SIGINT into a drain.
import { makeLogger } from "../log.ts";
import { setDistrustListener } from "./http1/connection_pool.ts";
import { OptionError } from "../options.ts";
import { listBackendModels } from "./backend_client.ts";
import { parseWorkerConfig, type WorkerConfig, workerHelp } from "./config.ts";
import { ConfigFileError } from "./config_file.ts";
import { startWorker } from "./connection.ts";

function readConfig(): WorkerConfig | number {
  try {
    const config = parseWorkerConfig(
      Deno.args,
      (n) => Deno.env.get(n),
      () => Deno.hostname(),
    );
    if (config === null) {
      console.log(workerHelp());
      return 0;
    }
    return config;
  } catch (e) {
    if (e instanceof ConfigFileError) {
      // The original's words and exit status for a file it cannot use.
      console.error(`error: ${e.message}`);
      return 1;
    }
    if (!(e instanceof OptionError)) throw e;
    console.error(`modelrelay worker: ${e.message}`);
    return 2;
  }
}

async function main(): Promise<number> {
  const config = readConfig();
  if (typeof config === "number") return config;
  const log = makeLogger(config.logLevel, config.logFormat, "worker");
  for (const warning of config.configWarnings ?? []) log("warn", warning);
  setDistrustListener((backend, why) =>
    log(
      "warn",
      "backend sent bytes nobody asked for: its connections are no longer reused",
      {
        backend,
        why,
      },
    )
  );
  let models = config.models;
  if (models === null) {
    try {
      models = await listBackendModels(
        { url: config.backendUrl, apiKey: config.backendApiKey },
        AbortSignal.timeout(10_000),
      );
    } catch (e) {
      log(
        "error",
        "could not discover models from the backend; start it or set MODELS",
        {
          reason: (e as Error).message,
        },
      );
      return 1;
    }
    if (models.length === 0) {
      log("error", "the backend lists no models; load one or set MODELS", {
        backend: config.backendUrl,
      });
      return 1;
    }
  }
  log("info", "worker starting", {
    proxy: config.connectUrl,
    name: config.workerName,
    backend: config.backendUrl,
    models: models.join(","),
    max_concurrent: config.maxConcurrent,
    models_source: config.models === null ? "discovered" : "configured",
    // Whether a key is set, never the key.
    backend_key: config.backendApiKey === null ? "none" : "set",
  });
  const worker = startWorker(config, models, { log, random: Math.random });
  const onSignal = () => worker.signal();
  Deno.addSignalListener("SIGTERM", onSignal);
  Deno.addSignalListener("SIGINT", onSignal);
  const code = await worker.done;
  Deno.removeSignalListener("SIGTERM", onSignal);
  Deno.removeSignalListener("SIGINT", onSignal);
  log("info", "worker stopped", { exit_code: code });
  return code;
}

if (import.meta.main) Deno.exit(await main());
