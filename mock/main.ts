// CLI for the mock backend: `deno run --allow-net mock/main.ts --port 8000`.
import { parseArgs } from "node:util";
import { startMockBackend } from "./backend.ts";
import {
  startSwappingBackend,
  type SwappingBackendOptions,
} from "./swapping.ts";

const HELP =
  `Mock OpenAI/Anthropic-compatible backend (see mock/backend.ts for request controls)

Usage: deno run --allow-net mock/main.ts [options]

  --port <n>        port to listen on (default 8000; 0 = any free port)
  --hostname <h>    address to bind (default 127.0.0.1)
  --delay-ms <n>    delay before each streamed word (default 30)
  --models <list>   comma-separated models listed at /v1/models (default mock-model)
  --answer <text>   the canned answer streamed word by word
  --api-key <key>   require Authorization: Bearer <key> on every route
  --swap <dialect>  a swapping box instead (mock/swapping.ts): ollama or
                    llama-swap; one of --models resident at a time
  --load-delay-ms <n>  with --swap: how long a load takes (default 2000)
  --help            show this help
`;

async function main(): Promise<number> {
  let values;
  try {
    values = parseArgs({
      args: Deno.args,
      options: {
        port: { type: "string", default: "8000" },
        hostname: { type: "string", default: "127.0.0.1" },
        "delay-ms": { type: "string", default: "30" },
        models: { type: "string", default: "mock-model" },
        answer: { type: "string" },
        "api-key": { type: "string" },
        swap: { type: "string" },
        "load-delay-ms": { type: "string", default: "2000" },
        help: { type: "boolean" },
      },
      strict: true,
    }).values;
  } catch (e) {
    console.error(`${(e as Error).message} (see --help)`);
    return 2;
  }
  if (values.help === true) {
    console.log(HELP);
    return 0;
  }
  const port = Number(values.port);
  const delay = Number(values["delay-ms"]);
  if (
    !Number.isInteger(port) || port < 0 || !Number.isFinite(delay) || delay < 0
  ) {
    console.error("--port and --delay-ms must be non-negative numbers");
    return 2;
  }
  const models = values.models.split(",").map((m) => m.trim()).filter((m) =>
    m !== ""
  );
  if (values.swap !== undefined) {
    return await swapping(values.swap, {
      port,
      models,
      chunkDelayMs: delay,
      loadDelayMs: Number(values["load-delay-ms"]),
      ...(values.answer === undefined ? {} : { answer: values.answer }),
    });
  }
  const backend = await startMockBackend({
    port,
    hostname: values.hostname,
    chunkDelayMs: delay,
    models,
    ...(values.answer === undefined ? {} : { answer: values.answer }),
    ...(values["api-key"] === undefined ? {} : { apiKey: values["api-key"] }),
  });
  console.log(
    `mock backend listening on ${backend.url} (models: ${models.join(", ")})`,
  );
  const stop = () => {
    backend.close().then(() => Deno.exit(0));
  };
  Deno.addSignalListener("SIGINT", stop);
  Deno.addSignalListener("SIGTERM", stop);
  return await new Promise<number>(() => {});
}

/** `--swap`: a box that holds one model at a time, until SIGINT/SIGTERM. */
async function swapping(
  dialect: string,
  opts: Omit<SwappingBackendOptions, "dialect">,
): Promise<number> {
  if (dialect !== "ollama" && dialect !== "llama-swap") {
    console.error(`--swap takes ollama or llama-swap, got "${dialect}"`);
    return 2;
  }
  if (!Number.isFinite(opts.loadDelayMs) || opts.loadDelayMs! < 0) {
    console.error("--load-delay-ms must be a non-negative number");
    return 2;
  }
  const box = await startSwappingBackend({ dialect, ...opts });
  console.log(
    `mock ${dialect} box listening on ${box.url} (models: ${
      opts.models.join(", ")
    }; one resident, loads take ${opts.loadDelayMs} ms)`,
  );
  const stop = () => {
    console.log(`loads: ${box.stats.loads}`);
    box.close().then(() => Deno.exit(0));
  };
  Deno.addSignalListener("SIGINT", stop);
  Deno.addSignalListener("SIGTERM", stop);
  return await new Promise<number>(() => {});
}

if (import.meta.main) Deno.exit(await main());
