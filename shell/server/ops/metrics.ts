// The relay's counters (issue 7): fed by taps on the core's effects (and one
// event: a worker's bad secret), read by GET /metrics (Prometheus text), GET
// /admin/stats and, through those, the dashboard, so all three always agree.
// No per-request table: a request's `requestFinished` carries all it counts.
import type { Effect, Event, State } from "../../../core/mod.ts";
import { inFlightCount, queueDepth } from "../../../core/mod.ts";

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

/** Distinct model label values kept; more collapse into "other" (clients choose model names). */
export const MODEL_LABELS_MAX = 100;
export const OTHER_MODEL = "other";

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

export class Metrics {
  readonly #models = new Set<string>();
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
  readonly #tenants = new Set<string>();
  /** tenant -> requests refused with 429 (rate limit). */
  readonly rateLimited = new Map<string, number>();
  /** model -> responses whose backend reported X-Cache-Hit: true. */
  readonly cacheHits = new Map<string, number>();
  /** model -> responses that reported X-Cache-Hit at all (true or false). */
  readonly cacheReports = new Map<string, number>();
  cacheTokensReused = 0;
  readonly lifecycleTasks = new Map<string, number>();

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
        this.bytes += Buffer.byteLength(effect.chunk, "utf8");
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

  #tenantLabel(tenant: string): string {
    if (this.#tenants.has(tenant)) return tenant;
    if (this.#tenants.size >= MODEL_LABELS_MAX) return OTHER_MODEL;
    this.#tenants.add(tenant);
    return tenant;
  }

  /** Average and p95 queue wait in ms from the histogram (GET /v1/capabilities). */
  queueWaitStats(): { avgWaitMs: number; p95WaitMs: number } {
    const h = this.queueWaitSeconds;
    return {
      avgWaitMs: h.count === 0 ? 0 : Math.round(h.sum / h.count * 1000),
      p95WaitMs: Math.round((h.quantile(0.95) ?? 0) * 1000),
    };
  }

  authFailure(kind: AuthFailureKind): void {
    inc(this.authFailures, kind);
  }

  #modelLabel(model: string): string {
    if (this.#models.has(model)) return model;
    if (this.#models.size >= MODEL_LABELS_MAX) return OTHER_MODEL;
    this.#models.add(model);
    return model;
  }

  requestFinished(e: Extract<Effect, { kind: "requestFinished" }>): void {
    const tenant = this.#tenantLabel(e.tenant);
    inc(this.tenantRequests, tenant + SEP + e.outcome);
    if (e.status === 429) inc(this.rateLimited, tenant);
    inc(
      this.requests,
      e.route + SEP + this.#modelLabel(e.model) + SEP + e.outcome,
    );
    if (e.cacheReport !== null) {
      const label = this.#modelLabel(e.model);
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

  /** GET /metrics: Prometheus text exposition format 0.0.4. */
  prometheus(state: State, nowMs: number): string {
    const out: string[] = [];
    const head = (name: string, type: string, help: string) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    };
    const gauge = (name: string, help: string, value: number) => {
      head(name, "gauge", help);
      out.push(`${name} ${value}`);
    };
    const counter = (name: string, help: string, value: number) => {
      head(name, "counter", help);
      out.push(`${name} ${value}`);
    };
    const histogram = (name: string, help: string, h: Histogram) => {
      head(name, "histogram", help);
      let cumulative = 0;
      LATENCY_BUCKETS.forEach((le, i) => {
        cumulative += h.counts[i]!;
        out.push(`${name}_bucket{le="${le}"} ${cumulative}`);
      });
      out.push(`${name}_bucket{le="+Inf"} ${h.count}`);
      out.push(`${name}_sum ${h.sum}`);
      out.push(`${name}_count ${h.count}`);
    };

    head(
      "modelrelay_requests_total",
      "counter",
      "Inference requests that ended, by route, model and outcome.",
    );
    for (const [key, n] of this.requests) {
      const [route, model, outcome] = key.split(SEP) as [
        string,
        string,
        string,
      ];
      out.push(
        `modelrelay_requests_total${labels({ route, model, outcome })} ${n}`,
      );
    }
    head(
      "modelrelay_tenant_requests_total",
      "counter",
      "Inference requests that ended, by tenant (X-Tenant-ID or the key's tenant) and outcome.",
    );
    for (const [key, n] of this.tenantRequests) {
      const [tenant, outcome] = key.split(SEP) as [string, string];
      out.push(
        `modelrelay_tenant_requests_total${labels({ tenant, outcome })} ${n}`,
      );
    }
    head(
      "modelrelay_rate_limited_total",
      "counter",
      "Requests refused with 429 by the per-tenant rate limit, by tenant.",
    );
    for (const [tenant, n] of this.rateLimited) {
      out.push(`modelrelay_rate_limited_total${labels({ tenant })} ${n}`);
    }
    head(
      "modelrelay_cache_hits_total",
      "counter",
      "Responses whose backend reported X-Cache-Hit: true, by model.",
    );
    for (const [model, n] of this.cacheHits) {
      out.push(`modelrelay_cache_hits_total${labels({ model })} ${n}`);
    }
    head(
      "modelrelay_cache_reports_total",
      "counter",
      "Responses whose backend reported X-Cache-Hit at all, by model (hit rate = hits / reports).",
    );
    for (const [model, n] of this.cacheReports) {
      out.push(`modelrelay_cache_reports_total${labels({ model })} ${n}`);
    }
    counter(
      "modelrelay_cache_tokens_reused_total",
      "Prompt tokens served from cache, as reported in X-Cache-Tokens-Reused.",
      this.cacheTokensReused,
    );
    head(
      "modelrelay_lifecycle_tasks_total",
      "counter",
      "Lifecycle tasks (model-load, model-unload, cache-flush) that ended, by operation and status.",
    );
    for (const [key, n] of this.lifecycleTasks) {
      const [operation, status] = key.split(SEP) as [string, string];
      out.push(
        `modelrelay_lifecycle_tasks_total${labels({ operation, status })} ${n}`,
      );
    }
    head(
      "modelrelay_responses_total",
      "counter",
      "Inference requests that ended, by HTTP status sent to the client.",
    );
    for (const [status, n] of this.responsesByStatus) {
      out.push(`modelrelay_responses_total${labels({ status })} ${n}`);
    }
    histogram(
      "modelrelay_request_duration_seconds",
      "Time from request arrival to its end.",
      this.requestSeconds,
    );
    histogram(
      "modelrelay_time_to_first_byte_seconds",
      "Time from request arrival to the first byte from a worker.",
      this.firstByteSeconds,
    );
    histogram(
      "modelrelay_queue_wait_seconds",
      "Time requests spent queued.",
      this.queueWaitSeconds,
    );
    head(
      "modelrelay_queue_depth",
      "gauge",
      "Requests waiting in the queue, by provider.",
    );
    for (const [provider, q] of state.queues) {
      out.push(`modelrelay_queue_depth${labels({ provider })} ${q.length}`);
    }
    gauge(
      "modelrelay_in_flight_requests",
      "Requests dispatched to a worker and not yet ended.",
      inFlightCount(state),
    );
    gauge(
      "modelrelay_workers_connected",
      "Registered workers.",
      state.workers.size,
    );
    counter(
      "modelrelay_worker_registrations_total",
      "Workers that registered.",
      this.workerRegistrations,
    );
    counter(
      "modelrelay_worker_rejections_total",
      "Worker connections refused (bad secret, rate limit, protocol).",
      this.workerRejections,
    );
    counter(
      "modelrelay_stream_chunks_total",
      "Response chunks streamed to clients.",
      this.chunks,
    );
    counter(
      "modelrelay_stream_bytes_total",
      "Bytes (UTF-8) of response chunks streamed to clients.",
      this.bytes,
    );
    counter(
      "modelrelay_requeues_total",
      "Times requests were put back in the queue after losing their worker.",
      this.requeues,
    );
    head(
      "modelrelay_cancels_total",
      "counter",
      "Cancel messages sent to workers, by reason.",
    );
    for (const [reason, n] of this.cancels) {
      out.push(`modelrelay_cancels_total${labels({ reason })} ${n}`);
    }
    head(
      "modelrelay_auth_failures_total",
      "counter",
      "Failed authentications, by kind (api_key, admin_token, worker_secret).",
    );
    for (const [kind, n] of this.authFailures) {
      out.push(`modelrelay_auth_failures_total${labels({ kind })} ${n}`);
    }
    gauge(
      "modelrelay_uptime_seconds",
      "Seconds since the server started.",
      (nowMs - this.startedAtMs) / 1000,
    );
    return out.join("\n") + "\n";
  }
}
