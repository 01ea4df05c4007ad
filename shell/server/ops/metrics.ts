// The relay's counters (issue 7): fed by taps on the core's effects (and one
// event: a worker's bad secret), read by GET /metrics (Prometheus text), GET
// /admin/stats and, through those, the dashboard, so all three always agree.
// No per-request table: a request's `requestFinished` carries all it counts.
import type { Effect, Event, State } from "../../../core/mod.ts";
import { inFlightCount, queueDepth } from "../../../core/mod.ts";
import { pieceBytes } from "../../piece_bytes.ts";

/** Upper bounds in seconds, shared by the latency histograms. */
export const LATENCY_BUCKETS = [
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
  60,
  120,
  300,
] as const;

/**
 * Distinct values kept per label kind whose values clients choose (model names,
 * tenants); past the cap a new value is counted as "other", so a client cannot
 * grow /metrics without bound.
 */
export const LABEL_VALUES_MAX = {
  model: 100,
  tenant: 100,
  route: 50,
  // Issue 30: worker names come from workers (WORKER_NAME), not clients, but
  // a fleet that churns names must not grow /metrics either.
  worker: 100,
} as const;
export const OTHER_LABEL = "other";

/** The values one label kind has admitted, and how many it may. */
type LabelCap = { seen: Set<string>; max: number };

/** `value` itself while the cap has room (or already holds it), else "other". */
function capped(cap: LabelCap, value: string): string {
  if (cap.seen.has(value)) return value;
  if (cap.seen.size >= cap.max) return OTHER_LABEL;
  cap.seen.add(value);
  return value;
}

export class Histogram {
  readonly counts = new Array<number>(LATENCY_BUCKETS.length + 1).fill(0);
  sum = 0;
  count = 0;

  observe(seconds: number): void {
    let i = 0;
    while (i < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[i]!) i++;
    this.counts[i]!++;
    this.sum += seconds;
    this.count++;
  }

  /**
   * Estimated quantile in seconds, interpolated inside the bucket the way
   * Prometheus' histogram_quantile does; null with no observations.
   */
  quantile(q: number): number | null {
    if (this.count === 0) return null;
    const rank = q * this.count;
    let below = 0;
    for (let i = 0; i < this.counts.length; i++) {
      const n = this.counts[i]!;
      if (below + n >= rank && n > 0) {
        const lower = i === 0 ? 0 : LATENCY_BUCKETS[i - 1]!;
        // The +Inf bucket has no upper bound: report its lower bound.
        if (i === LATENCY_BUCKETS.length) return lower;
        const upper = LATENCY_BUCKETS[i]!;
        return lower + (upper - lower) * ((rank - below) / n);
      }
      below += n;
    }
    return LATENCY_BUCKETS[LATENCY_BUCKETS.length - 1]!;
  }
}

export type AuthFailureKind =
  | "api_key"
  | "admin_token"
  | "metrics_token"
  | "tenant_mismatch"
  | "worker_secret";

function inc(map: Map<string, number>, key: string, by = 1): void {
  map.set(key, (map.get(key) ?? 0) + by);
}

function escapeLabel(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function labels(pairs: Record<string, string>): string {
  const parts = Object.entries(pairs).map(([k, v]) =>
    `${k}="${escapeLabel(v)}"`
  );
  return parts.length === 0 ? "" : `{${parts.join(",")}}`;
}

const SEP = "\u0000";

/**
 * A counter's key built from three parts, kept while the parts repeat (issue
 * 31: most requests share their route, model and outcome, and a key kept is a
 * string already hashed, where one joined anew is built and hashed on every
 * request). `build` must answer the same for the same parts, which `capped`
 * does: a value it once let in or sent to "other" stays so.
 */
function lastKey(
  build: (a: string, b: string, c: string) => string,
): (a: string, b: string, c: string) => string {
  let a0: string | null = null, b0 = "", c0 = "", key = "";
  return (a, b, c) => {
    if (a !== a0 || b !== b0 || c !== c0) {
      a0 = a;
      b0 = b;
      c0 = c;
      key = build(a, b, c);
    }
    return key;
  };
}

/** A route label: the path without its query. */
function routePath(route: string): string {
  const q = route.indexOf("?");
  return q === -1 ? route : route.slice(0, q);
}

export class Metrics {
  readonly #models: LabelCap = { seen: new Set(), max: LABEL_VALUES_MAX.model };
  /** Issue 25: any /v1 path is forwarded, so clients choose routes too (query left out). */
  readonly #routes: LabelCap = { seen: new Set(), max: LABEL_VALUES_MAX.route };
  readonly #tenants: LabelCap = {
    seen: new Set(),
    max: LABEL_VALUES_MAX.tenant,
  };
  readonly #workers: LabelCap = {
    seen: new Set(),
    max: LABEL_VALUES_MAX.worker,
  };
  /** route SEP model SEP outcome -> count */
  readonly requests = new Map<string, number>();
  /** status code -> count */
  readonly responsesByStatus = new Map<string, number>();
  readonly requestSeconds = new Histogram();
  readonly firstByteSeconds = new Histogram();
  readonly queueWaitSeconds = new Histogram();
  requeues = 0;
  readonly cancels = new Map<string, number>();
  chunks = 0;
  bytes = 0;
  readonly authFailures = new Map<string, number>();
  workerRegistrations = 0;
  workerRejections = 0;
  /** tenant SEP outcome -> count (spec 004 per-tenant counters). */
  readonly tenantRequests = new Map<string, number>();
  /** Issue 26: tenant|model|kind (prompt, completion) -> tokens of finished requests. */
  readonly tokens = new Map<string, number>();
  /** tenant -> requests refused with 429 (rate limit). */
  readonly rateLimited = new Map<string, number>();
  /** model -> responses whose backend reported X-Cache-Hit: true. */
  readonly cacheHits = new Map<string, number>();
  /** model -> responses that reported X-Cache-Hit at all (true or false). */
  readonly cacheReports = new Map<string, number>();
  cacheTokensReused = 0;
  readonly lifecycleTasks = new Map<string, number>();
  /** Issue 33: usage records let go while the database refused writes. */
  usageRecordsDropped = 0;
  /** Issue 33: reason (queue_full, export_failed, shutdown) -> spans never exported. */
  readonly spansDropped = new Map<string, number>();
  /** Issue 30: model SEP worker SEP reason (demand, reported) -> loads started. */
  readonly modelLoads = new Map<string, number>();
  /** Issue 30: model SEP worker -> models that left a worker's memory. */
  readonly modelEvictions = new Map<string, number>();
  /** Issue 30: start to loaded, for loads whose start the relay saw. */
  readonly modelLoadSeconds = new Histogram();

  readonly #requestKey = lastKey((route, model, outcome) =>
    capped(this.#routes, routePath(route)) + SEP +
    capped(this.#models, model) + SEP + outcome
  );
  readonly #tenantKey = lastKey((tenant, outcome) =>
    capped(this.#tenants, tenant) + SEP + outcome
  );
  readonly #promptKey = lastKey((tenant, model) =>
    capped(this.#tenants, tenant) + SEP + capped(this.#models, model) + SEP +
    "prompt"
  );
  readonly #completionKey = lastKey((tenant, model) =>
    capped(this.#tenants, tenant) + SEP + capped(this.#models, model) + SEP +
    "completion"
  );

  constructor(readonly startedAtMs: number) {}

  /** Tap on every event submitted by the shell: only a refused worker secret counts. */
  onEvent(e: Event): void {
    switch (e.kind) {
      case "workerConnectAttempted":
        if (!e.secretValid) this.authFailure("worker_secret");
        return;
      default:
        return;
    }
  }

  /** Tap on every effect, before it runs. Keep the chunk path allocation-free. */
  onEffect(effect: Effect): void {
    switch (effect.kind) {
      case "writeChunk":
        this.chunks++;
        this.bytes += pieceBytes(effect.chunk);
        return;
      case "sendToWorker": {
        const m = effect.message;
        if (m.type === "cancel") {
          inc(
            this.cancels,
            typeof m.reason === "string" ? m.reason : "other",
          );
        } else if (m.type === "register_ack") {
          this.workerRegistrations++;
        }
        return;
      }
      case "rejectWorker":
        this.workerRejections++;
        return;
      case "requestFinished":
        this.requestFinished(effect);
        return;
      case "modelLoadStarted":
        inc(
          this.modelLoads,
          this.modelWorker(effect.model, effect.workerName) + SEP +
            effect.reason,
        );
        return;
      case "modelEvicted":
        inc(
          this.modelEvictions,
          this.modelWorker(effect.model, effect.workerName),
        );
        return;
      case "modelLoadFinished":
        if (effect.loadMs !== null) {
          this.modelLoadSeconds.observe(effect.loadMs / 1000);
        }
        return;
      case "lifecycleTaskChanged":
        if (effect.task.status !== "running") {
          inc(
            this.lifecycleTasks,
            effect.task.operation + SEP + effect.task.status,
          );
        }
        return;
      default:
        return;
    }
  }

  /** The model and worker labels of a residency change, each capped. */
  modelWorker(model: string, worker: string): string {
    return capped(this.#models, model) + SEP + capped(this.#workers, worker);
  }

  /** Average and p95 queue wait in ms from the histogram (GET /v1/capabilities). */
  queueWaitStats(): { avgWaitMs: number; p95WaitMs: number } {
    const h = this.queueWaitSeconds;
    return {
      avgWaitMs: h.count === 0 ? 0 : Math.round(h.sum / h.count * 1000),
      p95WaitMs: Math.round((h.quantile(0.95) ?? 0) * 1000),
    };
  }

  droppedUsageRecords(records: number): void {
    this.usageRecordsDropped += records;
  }

  droppedSpans(reason: string, spans: number): void {
    inc(this.spansDropped, reason, spans);
  }

  authFailure(kind: AuthFailureKind): void {
    inc(this.authFailures, kind);
  }

  requestFinished(e: Extract<Effect, { kind: "requestFinished" }>): void {
    inc(this.tenantRequests, this.#tenantKey(e.tenant, e.outcome, ""));
    if (e.status === 429) {
      inc(this.rateLimited, capped(this.#tenants, e.tenant));
    }
    inc(this.requests, this.#requestKey(e.route, e.model, e.outcome));
    if (e.cacheReport !== null) {
      const label = capped(this.#models, e.model);
      inc(this.cacheReports, label);
      if (e.cacheReport.hit) inc(this.cacheHits, label);
      this.cacheTokensReused += e.cacheReport.tokensReused;
    }
    inc(this.responsesByStatus, String(e.status));
    this.requestSeconds.observe(e.durationMs / 1000);
    this.queueWaitSeconds.observe(e.queueWaitMs / 1000);
    if (e.firstByteMs !== null) {
      this.firstByteSeconds.observe(e.firstByteMs / 1000);
    }
    this.requeues += e.requeues;
    if (e.usage.prompt !== null && e.usage.prompt > 0) {
      inc(this.tokens, this.#promptKey(e.tenant, e.model, ""), e.usage.prompt);
    }
    if (e.usage.completion !== null && e.usage.completion > 0) {
      inc(
        this.tokens,
        this.#completionKey(e.tenant, e.model, ""),
        e.usage.completion,
      );
    }
  }

  requestsByOutcome(): Record<string, number> {
    const out: Record<string, number> = {
      completed: 0,
      failed: 0,
      cancelled: 0,
      rejected: 0,
    };
    for (const [key, n] of this.requests) {
      const outcome = key.slice(key.lastIndexOf(SEP) + 1);
      out[outcome] = (out[outcome] ?? 0) + n;
    }
    return out;
  }

  /** Prompt plus completion tokens of every finished request (issue 26). */
  tokensTotal(): number {
    let n = 0;
    for (const v of this.tokens.values()) n += v;
    return n;
  }

  requestsTotal(): number {
    let n = 0;
    for (const v of this.requests.values()) n += v;
    return n;
  }

  /** The JSON of GET /admin/stats. */
  stats(state: State, nowMs: number): Record<string, unknown> {
    const ms = (s: number | null) => s === null ? null : Math.round(s * 1000);
    const byProvider: Record<string, number> = {};
    for (const [p, q] of state.queues) byProvider[p] = q.length;
    let draining = 0;
    for (const w of state.workers.values()) if (w.draining) draining++;
    return {
      uptime_secs: Math.round((nowMs - this.startedAtMs) / 100) / 10,
      workers_connected: state.workers.size,
      workers_draining: draining,
      worker_registrations_total: this.workerRegistrations,
      in_flight: inFlightCount(state),
      queue_depth: queueDepth(state),
      queue_depth_by_provider: byProvider,
      requests_total: this.requestsTotal(),
      requests_by_outcome: this.requestsByOutcome(),
      requests_by_status: Object.fromEntries(this.responsesByStatus),
      requeues_total: this.requeues,
      cancels_by_reason: Object.fromEntries(this.cancels),
      chunks_streamed_total: this.chunks,
      // Issue 26: modelrelay_tokens_total summed (the dashboard's tokens/s).
      tokens_total: this.tokensTotal(),
      bytes_streamed_total: this.bytes,
      auth_failures: Object.fromEntries(this.authFailures),
      latency_ms: {
        p50: ms(this.requestSeconds.quantile(0.5)),
        p95: ms(this.requestSeconds.quantile(0.95)),
      },
      time_to_first_byte_ms: {
        p50: ms(this.firstByteSeconds.quantile(0.5)),
        p95: ms(this.firstByteSeconds.quantile(0.95)),
      },
      quantiles_note:
        "estimated from the histogram buckets of /metrics, like histogram_quantile",
    };
  }

  /** GET /metrics: Prometheus text exposition format 0.0.4, one block per row of `METRICS`. */
  prometheus(state: State, nowMs: number): string {
    const out: string[] = [];
    for (const def of METRICS) {
      out.push(
        `# HELP ${def.name} ${def.help}`,
        `# TYPE ${def.name} ${def.type}`,
      );
      if (def.type === "histogram") {
        histogramLines(out, def.name, def.histogram(this));
        continue;
      }
      const v = def.value(this, state, nowMs);
      if (typeof v === "number") out.push(`${def.name} ${v}`);
      else {for (const x of v) {
          out.push(`${def.name}${labels(x.labels)} ${x.value}`);
        }}
    }
    return out.join("\n") + "\n";
  }
}

/** One labelled sample of a metric. */
type Sample = { labels: Record<string, string>; value: number };

/**
 * One metric of GET /metrics: a plain number, labelled samples, or a latency
 * histogram. A new metric is one more row in `METRICS`.
 */
type MetricDef =
  | {
    name: string;
    type: "counter" | "gauge";
    help: string;
    value: (m: Metrics, state: State, nowMs: number) => number | Sample[];
  }
  | {
    name: string;
    type: "histogram";
    help: string;
    histogram: (m: Metrics) => Histogram;
  };

/** The samples of a count map whose keys are label values joined by SEP, in `names` order. */
function byLabels(map: Map<string, number>, names: string[]): Sample[] {
  return [...map].map(([key, value]) => {
    const parts = key.split(SEP);
    return {
      labels: Object.fromEntries(names.map((n, i) => [n, parts[i] ?? ""])),
      value,
    };
  });
}

function histogramLines(out: string[], name: string, h: Histogram): void {
  let cumulative = 0;
  LATENCY_BUCKETS.forEach((le, i) => {
    cumulative += h.counts[i]!;
    out.push(`${name}_bucket{le="${le}"} ${cumulative}`);
  });
  out.push(`${name}_bucket{le="+Inf"} ${h.count}`);
  out.push(`${name}_sum ${h.sum}`);
  out.push(`${name}_count ${h.count}`);
}

/** Every metric of GET /metrics, in the order it is printed. */
export const METRICS: readonly MetricDef[] = [
  {
    name: "modelrelay_requests_total",
    type: "counter",
    help: "Inference requests that ended, by route, model and outcome.",
    value: (m) => byLabels(m.requests, ["route", "model", "outcome"]),
  },
  {
    name: "modelrelay_tenant_requests_total",
    type: "counter",
    help:
      "Inference requests that ended, by tenant (X-Tenant-ID or the key's tenant) and outcome.",
    value: (m) => byLabels(m.tenantRequests, ["tenant", "outcome"]),
  },
  {
    name: "modelrelay_tokens_total",
    type: "counter",
    help:
      "Tokens of finished requests, by tenant, model and kind (prompt or completion; estimated completions included).",
    value: (m) => byLabels(m.tokens, ["tenant", "model", "kind"]),
  },
  {
    name: "modelrelay_rate_limited_total",
    type: "counter",
    help: "Requests refused with 429 by the per-tenant rate limit, by tenant.",
    value: (m) => byLabels(m.rateLimited, ["tenant"]),
  },
  {
    name: "modelrelay_cache_hits_total",
    type: "counter",
    help: "Responses whose backend reported X-Cache-Hit: true, by model.",
    value: (m) => byLabels(m.cacheHits, ["model"]),
  },
  {
    name: "modelrelay_cache_reports_total",
    type: "counter",
    help:
      "Responses whose backend reported X-Cache-Hit at all, by model (hit rate = hits / reports).",
    value: (m) => byLabels(m.cacheReports, ["model"]),
  },
  {
    name: "modelrelay_cache_tokens_reused_total",
    type: "counter",
    help:
      "Prompt tokens served from cache, as reported in X-Cache-Tokens-Reused.",
    value: (m) => m.cacheTokensReused,
  },
  {
    name: "modelrelay_lifecycle_tasks_total",
    type: "counter",
    help:
      "Lifecycle tasks (model-load, model-unload, cache-flush) that ended, by operation and status.",
    value: (m) => byLabels(m.lifecycleTasks, ["operation", "status"]),
  },
  {
    name: "modelrelay_model_loads_total",
    type: "counter",
    help:
      "Model loads started on workers (issue 30), by model, worker and reason (demand: the relay sent a request there; reported: the worker's residency report showed one).",
    value: (m) => byLabels(m.modelLoads, ["model", "worker", "reason"]),
  },
  {
    name: "modelrelay_model_evictions_total",
    type: "counter",
    help:
      "Models that left a worker's memory (to make room, or as its report showed), by model and worker.",
    value: (m) => byLabels(m.modelEvictions, ["model", "worker"]),
  },
  {
    name: "modelrelay_model_load_seconds",
    type: "histogram",
    help:
      "Time from a model load's start to the model being loaded, for loads whose start the relay saw.",
    histogram: (m) => m.modelLoadSeconds,
  },
  {
    name: "modelrelay_responses_total",
    type: "counter",
    help: "Inference requests that ended, by HTTP status sent to the client.",
    value: (m) => byLabels(m.responsesByStatus, ["status"]),
  },
  {
    name: "modelrelay_request_duration_seconds",
    type: "histogram",
    help: "Time from request arrival to its end.",
    histogram: (m) => m.requestSeconds,
  },
  {
    name: "modelrelay_time_to_first_byte_seconds",
    type: "histogram",
    help: "Time from request arrival to the first byte from a worker.",
    histogram: (m) => m.firstByteSeconds,
  },
  {
    name: "modelrelay_queue_wait_seconds",
    type: "histogram",
    help: "Time requests spent queued.",
    histogram: (m) => m.queueWaitSeconds,
  },
  {
    name: "modelrelay_queue_depth",
    type: "gauge",
    help: "Requests waiting in the queue, by provider.",
    value: (_m, state) =>
      [...state.queues].map(([provider, q]) => ({
        labels: { provider },
        value: q.length,
      })),
  },
  {
    name: "modelrelay_in_flight_requests",
    type: "gauge",
    help: "Requests dispatched to a worker and not yet ended.",
    value: (_m, state) => inFlightCount(state),
  },
  {
    name: "modelrelay_workers_connected",
    type: "gauge",
    help: "Registered workers.",
    value: (_m, state) => state.workers.size,
  },
  {
    name: "modelrelay_worker_registrations_total",
    type: "counter",
    help: "Workers that registered.",
    value: (m) => m.workerRegistrations,
  },
  {
    name: "modelrelay_worker_rejections_total",
    type: "counter",
    help: "Worker connections refused (bad secret, rate limit, protocol).",
    value: (m) => m.workerRejections,
  },
  {
    name: "modelrelay_stream_chunks_total",
    type: "counter",
    help: "Response chunks streamed to clients.",
    value: (m) => m.chunks,
  },
  {
    name: "modelrelay_stream_bytes_total",
    type: "counter",
    help: "Bytes (UTF-8) of response chunks streamed to clients.",
    value: (m) => m.bytes,
  },
  {
    name: "modelrelay_requeues_total",
    type: "counter",
    help:
      "Times requests were put back in the queue after losing their worker.",
    value: (m) => m.requeues,
  },
  {
    name: "modelrelay_cancels_total",
    type: "counter",
    help: "Cancel messages sent to workers, by reason.",
    value: (m) => byLabels(m.cancels, ["reason"]),
  },
  {
    name: "modelrelay_auth_failures_total",
    type: "counter",
    help:
      "Failed authentications, by kind (api_key, admin_token, worker_secret).",
    value: (m) => byLabels(m.authFailures, ["kind"]),
  },
  {
    name: "modelrelay_usage_records_dropped_total",
    type: "counter",
    help:
      "Usage records never written: more than 50,000 waited while the database refused writes (locked, disk full).",
    value: (m) => m.usageRecordsDropped,
  },
  {
    name: "modelrelay_spans_dropped_total",
    type: "counter",
    help:
      "Trace spans never exported to OTEL_EXPORTER_OTLP_ENDPOINT, by reason (queue_full, export_failed, shutdown).",
    value: (m) => byLabels(m.spansDropped, ["reason"]),
  },
  {
    name: "modelrelay_uptime_seconds",
    type: "gauge",
    help: "Seconds since the server started.",
    value: (m, _state, nowMs) => (nowMs - m.startedAtMs) / 1000,
  },
];
