// The mock backend as its own process, for the end-to-end tests: mock/backend.ts
// on one port and its counters (MockBackendStats) as JSON on GET /stats of a
// second port, so a test can see what the backend saw — for example that an
// aborted client stream reached it as an abort.
import { parseArgs } from "node:util";
import { startMockBackend } from "../mock/backend.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    port: { type: "string", default: "0" },
    "delay-ms": { type: "string", default: "30" },
    models: { type: "string", default: "mock-model" },
    "api-key": { type: "string" },
  },
  strict: true,
});
const backend = await startMockBackend({
  port: Number(values.port),
  chunkDelayMs: Number(values["delay-ms"]),
  models: values.models.split(","),
  ...(values["api-key"] === undefined ? {} : { apiKey: values["api-key"] }),
});
const stats = Deno.serve(
  { port: 0, hostname: "127.0.0.1", onListen() {} },
  () => Response.json(backend.stats),
);
console.log(
  `mock backend listening on ${backend.url} stats on http://127.0.0.1:${stats.addr.port}/stats`,
);
const stop = async () => {
  await Promise.all([backend.close(), stats.shutdown()]);
  Deno.exit(0);
};
Deno.addSignalListener("SIGINT", stop);
Deno.addSignalListener("SIGTERM", stop);
