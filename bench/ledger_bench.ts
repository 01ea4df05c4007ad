// Issue 26: what the usage ledger costs per finished request, alone: a record
// queued, then written in batches of FLUSH_ROWS into a real database file (WAL),
// as the relay does; the stream estimate per chunk; the tracing per request. `deno bench --allow-read --allow-write --allow-env bench/ledger_bench.ts`
import { openRelayDatabase } from "../shell/server/ops/api_keys.ts";
import {
  type Finished,
  FLUSH_ROWS,
  openUsageLedger,
} from "../shell/server/ops/usage_ledger.ts";
import { countDeltas } from "../core/state/usage.ts";
import { spansOf, traceRequest } from "../shell/server/ops/tracing.ts";

const dir = Deno.makeTempDirSync({ prefix: "ledger-bench-" });
const db = openRelayDatabase(`${dir}/bench.db`);
const ledger = openUsageLedger(db, 30, (e) => {
  throw e;
});
const f: Finished = {
  kind: "requestFinished",
  requestId: "req_0123456789abcdef",
  route: "/v1/chat/completions",
  model: "llama3.2:3b",
  tenant: "team-a",
  outcome: "completed",
  status: 200,
  durationMs: 123.4,
  queueWaitMs: 0.5,
  firstByteMs: 12,
  requeues: 0,
  cacheReport: null,
  keyId: "key_0123456789abcdef",
  keyName: "team-a app",
  modelAsked: "llama3.2:3b",
  modelServed: "llama3.2:3b",
  workerName: "gpu-box-1",
  usage: { prompt: 812, completion: 256, cached: null, estimated: false },
};

Deno.bench(
  `ledger: ${FLUSH_ROWS} records queued and written in one batch`,
  () => {
    const now = Date.now();
    for (let i = 0; i < FLUSH_ROWS; i++) ledger.record(f, now);
    ledger.flush();
  },
);

const chunk =
  'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764000000,"model":"m","choices":[{"index":0,"delta":{"content":"word "},"logprobs":null,"finish_reason":null}]}\n\n';
const bytes = new TextEncoder().encode(chunk);

Deno.bench("estimate: content deltas counted in one SSE chunk (text)", () => {
  countDeltas(chunk, "/v1/chat/completions");
});

Deno.bench("estimate: content deltas counted in one SSE chunk (bytes)", () => {
  countDeltas(bytes, "/v1/chat/completions");
});

Deno.bench(
  "traces: traceparent continued for one request (ids, header)",
  () => {
    traceRequest({
      traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    });
  },
);

Deno.bench("traces: one request's 5 spans built for export", () => {
  const ids = traceRequest({});
  spansOf(ids, f, Date.now());
});

globalThis.addEventListener("unload", () => {
  ledger.close();
  db.close();
  Deno.removeSync(dir, { recursive: true });
});
