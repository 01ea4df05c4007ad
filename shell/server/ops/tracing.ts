// Traces (issue 26). Every request carries a W3C `traceparent` to its backend:
// the client's trace continued, or one started here. With
// OTEL_EXPORTER_OTLP_ENDPOINT set, each finished request also becomes spans,
// sent in batches as OTLP/HTTP JSON to <endpoint>/v1/traces:
//
//   modelrelay.request      the relay's server span (parent: the client's span)
//   ├ modelrelay.queue_wait arrival until dispatch
//   └ modelrelay.dispatch   dispatch until the end; its id is the backend's parent
//     ├ modelrelay.first_byte   dispatch until the first byte
//     └ modelrelay.completion   first byte (or dispatch) until the end
//
// The spans are built from the request's `requestFinished` (its times), so the
// hot path only mints ids and sets a header; nothing is timed twice. Deno's
// built-in OpenTelemetry instruments Deno.serve and fetch, neither of which the
// client door uses (its own HTTP/1.1 on Deno.listen), so the spans are written here instead.
import { randomBytes } from "node:crypto";
import type { Effect } from "../../../core/mod.ts";

type Finished = Extract<Effect, { kind: "requestFinished" }>;

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ZERO_TRACE = "0".repeat(32);
const ZERO_SPAN = "0".repeat(16);

export type TraceIds = {
  traceId: string;
  /** The client's span, null when the trace started here. */
  parentSpanId: string | null;
  requestSpanId: string;
  dispatchSpanId: string;
  flags: string;
};

/**
 * Random ids cut from a pooled 4 KiB draw, hex-encoded once per draw: one
 * crypto call and one encode per ~128 requests, and a slice per id (issue 31:
 * an encode per id was two native calls per request).
 */
let pool = "";
let poolAt = 0;

function hex(bytes: number): string {
  const chars = bytes * 2;
  if (poolAt + chars > pool.length) {
    pool = randomBytes(4096).toString("hex");
    poolAt = 0;
  }
  const out = pool.slice(poolAt, poolAt + chars);
  poolAt += chars;
  return out;
}

/** The client's traceparent, parsed; null when absent or malformed (then a trace starts here). */
export function parseTraceparent(
  value: string | undefined,
): { traceId: string; spanId: string; flags: string } | null {
  const m = value === undefined ? null : TRACEPARENT.exec(value.trim());
  if (m === null || m[1] === ZERO_TRACE || m[2] === ZERO_SPAN) return null;
  return { traceId: m[1]!, spanId: m[2]!, flags: m[3]! };
}

/** W3C trace context: at most 32 list members; 512 characters is what every vendor must pass on. */
const TRACESTATE_CHARS_MAX = 512;
const TRACESTATE_MEMBERS_MAX = 32;
const TRACESTATE_MEMBER =
  /^[a-z0-9][a-z0-9_\-*/@]{0,255}=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;

/**
 * The client's tracestate if it may go on (issue 33.11): only beside a valid
 * traceparent (W3C: a trace started here has no state of the client's), within
 * 512 characters and 32 members, each well-formed; else dropped whole.
 */
export function forwardedTracestate(value: string): string | null {
  if (value.length > TRACESTATE_CHARS_MAX) return null;
  const members = value.split(",").map((m) => m.trim()).filter((m) => m !== "");
  if (
    members.length === 0 || members.length > TRACESTATE_MEMBERS_MAX ||
    !members.every((m) => TRACESTATE_MEMBER.test(m))
  ) return null;
  return members.join(",");
}

/**
 * Continues or starts the request's trace and sets the traceparent the backend
 * sees (the dispatch span as its parent), and the tracestate that may go with
 * it. `headers` are the lowercased request headers the core will forward.
 */
export function traceRequest(headers: Record<string, string>): TraceIds {
  const client = parseTraceparent(headers["traceparent"]);
  const state = headers["tracestate"];
  if (state !== undefined) {
    const kept = client === null ? null : forwardedTracestate(state);
    if (kept === null) delete headers["tracestate"];
    else headers["tracestate"] = kept;
  }
  const ids: TraceIds = {
    traceId: client?.traceId ?? hex(16),
    parentSpanId: client?.spanId ?? null,
    requestSpanId: hex(8),
    dispatchSpanId: hex(8),
    flags: client?.flags ?? "01",
  };
  headers["traceparent"] =
    `00-${ids.traceId}-${ids.dispatchSpanId}-${ids.flags}`;
  return ids;
}

type Attr = {
  key: string;
  value: { stringValue: string } | { intValue: string };
};

export type OtlpSpan = {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: Attr[];
  status: { code: number };
};

const KIND_INTERNAL = 1;
const KIND_SERVER = 2;
const KIND_CLIENT = 3;

function nanos(ms: number): string {
  return (BigInt(Math.round(ms * 1000)) * 1000n).toString();
}

function attrs(f: Finished): Attr[] {
  const s = (key: string, v: string | null) =>
    v === null ? [] : [{ key, value: { stringValue: v } }];
  const i = (key: string, v: number | null) =>
    v === null ? [] : [{ key, value: { intValue: String(v) } }];
  return [
    ...s("modelrelay.request_id", f.requestId),
    ...s("http.route", f.route),
    ...s("gen_ai.request.model", f.model),
    ...s("modelrelay.tenant", f.tenant),
    ...s("modelrelay.key_id", f.keyId),
    ...s("modelrelay.worker", f.workerName),
    ...s("modelrelay.outcome", f.outcome),
    ...i("http.response.status_code", f.status),
    ...i("gen_ai.usage.input_tokens", f.usage.prompt),
    ...i("gen_ai.usage.output_tokens", f.usage.completion),
  ];
}

/** The spans of one finished request that ended at wall time `endMs`. */
export function spansOf(ids: TraceIds, f: Finished, endMs: number): OtlpSpan[] {
  const startMs = endMs - f.durationMs;
  const error = f.status >= 400 ? 2 : 1;
  const span = (
    name: string,
    spanId: string,
    parentSpanId: string | null,
    kind: number,
    from: number,
    to: number,
    attributes: Attr[] = [],
  ): OtlpSpan => ({
    traceId: ids.traceId,
    spanId,
    ...(parentSpanId === null ? {} : { parentSpanId }),
    name,
    kind,
    startTimeUnixNano: nanos(from),
    endTimeUnixNano: nanos(Math.max(from, to)),
    attributes,
    status: { code: error },
  });
  const out = [
    span(
      "modelrelay.request",
      ids.requestSpanId,
      ids.parentSpanId,
      KIND_SERVER,
      startMs,
      endMs,
      attrs(f),
    ),
    span(
      "modelrelay.queue_wait",
      hex(8),
      ids.requestSpanId,
      KIND_INTERNAL,
      startMs,
      startMs + f.queueWaitMs,
    ),
  ];
  if (f.workerName === null) return out; // never left the queue
  const dispatchedMs = startMs + f.queueWaitMs;
  out.push(
    span(
      "modelrelay.dispatch",
      ids.dispatchSpanId,
      ids.requestSpanId,
      KIND_CLIENT,
      dispatchedMs,
      endMs,
    ),
  );
  const firstMs = f.firstByteMs === null ? null : startMs + f.firstByteMs;
  if (firstMs !== null) {
    out.push(
      span(
        "modelrelay.first_byte",
        hex(8),
        ids.dispatchSpanId,
        KIND_INTERNAL,
        dispatchedMs,
        firstMs,
      ),
    );
  }
  out.push(
    span(
      "modelrelay.completion",
      hex(8),
      ids.dispatchSpanId,
      KIND_INTERNAL,
      firstMs ?? dispatchedMs,
      endMs,
    ),
  );
  return out;
}

export type Tracer = {
  /** Sets the request's traceparent; remembers its ids when spans are exported. */
  start(requestId: string, headers: Record<string, string>): void;
  /** The request's spans, queued for export (no-op without an endpoint). */
  finish(f: Finished, wallMs: number): void;
  /** Sends what is queued, one export at a time; resolves when nothing is left. */
  flush(): Promise<void>;
  /** The last flush, bounded by CLOSE_MS: what is still unsent then is dropped. */
  close(): Promise<void>;
};

/** Why spans were let go: counted in modelrelay_spans_dropped_total{reason}. */
export type SpanDrop = "queue_full" | "export_failed" | "shutdown";

export const EXPORT_MS = 1000;
/** One export's bound: the OTLP exporters' default (OTEL_EXPORTER_OTLP_TIMEOUT, 10 s). */
export const EXPORT_TIMEOUT_MS = 10_000;
/** How long close() waits for the last exports before it drops them (issue 33). */
export const CLOSE_MS = 3_000;
const BATCH_MAX = 512;
export const QUEUE_MAX = 8192;

/** One OTLP/HTTP JSON export: the error when it failed (refused, no answer in time), else null. */
async function sendSpans(
  url: string,
  serviceName: string,
  spans: OtlpSpan[],
  signal: AbortSignal,
): Promise<unknown> {
  const body = {
    resourceSpans: [{
      resource: {
        attributes: [{
          key: "service.name",
          value: { stringValue: serviceName },
        }],
      },
      scopeSpans: [{ scope: { name: "modelrelay" }, spans }],
    }],
  };
  try {
    const r = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal,
    });
    await r.body?.cancel();
    return r.ok ? null : new Error(`${url} answered ${r.status}`);
  } catch (e) {
    return e;
  }
}

/**
 * The relay's tracer. `endpoint` is OTEL_EXPORTER_OTLP_ENDPOINT ("" = no
 * export: only traceparent propagation, and no per-request memory).
 *
 * A collector that accepts and never answers must cost neither memory nor a
 * stop (issue 33): one export is in flight at a time, each bounded by
 * EXPORT_TIMEOUT_MS; spans wait in one queue of at most QUEUE_MAX, the oldest
 * dropped first; close() gives the last exports CLOSE_MS, then aborts.
 */
export function makeTracer(
  endpoint: string,
  serviceName: string,
  onError: (e: unknown) => void,
  onDrop: (reason: SpanDrop, spans: number) => void = () => {},
): Tracer {
  const exporting = endpoint !== "";
  const url = endpoint.replace(/\/+$/, "") + "/v1/traces";
  const open = new Map<string, TraceIds>();
  /** Spans waiting for an export (the one in flight holds its own batch). */
  let queue: OtlpSpan[] = [];
  let timer: ReturnType<typeof setTimeout> | null = null;
  let inFlight: { done: Promise<void>; abort: AbortController } | null = null;
  /** The one loop sending what waits, while anything does; shared by every flush. */
  let pumping: Promise<void> | null = null;
  let closing: Promise<void> | null = null;

  const exportNext = (): Promise<void> => {
    const batch = queue.splice(0, BATCH_MAX);
    const abort = new AbortController();
    const signal = AbortSignal.any([
      abort.signal,
      AbortSignal.timeout(EXPORT_TIMEOUT_MS),
    ]);
    const done = sendSpans(url, serviceName, batch, signal).then((error) => {
      inFlight = null;
      if (error === null) return;
      onError(error);
      onDrop("export_failed", batch.length);
    });
    inFlight = { done, abort };
    return done;
  };

  const tracer: Tracer = {
    start(requestId, headers) {
      const ids = traceRequest(headers);
      if (exporting) open.set(requestId, ids);
    },
    finish(f, wallMs) {
      if (!exporting) return;
      const ids = open.get(f.requestId);
      if (ids === undefined) return; // refused before it was traced
      open.delete(f.requestId);
      queue.push(...spansOf(ids, f, wallMs));
      // A receiver that cannot keep up loses the oldest spans, never the
      // relay's memory.
      const over = queue.length - QUEUE_MAX;
      if (over > 0) {
        queue.splice(0, over);
        onDrop("queue_full", over);
      }
      // A running pump takes these spans too: no timer (and no second loop).
      if (timer === null && pumping === null && closing === null) {
        timer = setTimeout(() => {
          timer = null;
          void tracer.flush();
        }, EXPORT_MS);
      }
    },
    flush() {
      if (timer !== null) {
        clearTimeout(timer);
        timer = null;
      }
      pumping ??= (async () => {
        try {
          while (queue.length > 0) await exportNext();
        } finally {
          pumping = null;
        }
      })();
      return pumping;
    },
    close() {
      closing ??= (async () => {
        let deadline: ReturnType<typeof setTimeout> | undefined;
        const late = new Promise<"late">((resolve) => {
          deadline = setTimeout(() => resolve("late"), CLOSE_MS);
        });
        const ended = await Promise.race([tracer.flush(), late]);
        clearTimeout(deadline);
        if (ended !== "late") return;
        if (queue.length > 0) onDrop("shutdown", queue.length);
        queue = [];
        const last = inFlight;
        last?.abort.abort();
        await last?.done;
      })();
      return closing;
    },
  };
  return tracer;
}
