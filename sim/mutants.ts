// Deliberately broken cores (TigerBeetle's canary): each wraps the real reducer
// and breaks one promise. A test asserts that the default sweep catches every
// one, which proves the invariants can fail (conventions §6, P5).
import {
  type Config,
  type Effect,
  EXTENSION_LIFECYCLE,
  reduce,
  type State,
} from "../core/mod.ts";
import type { ReduceFn } from "./run_scenario.ts";
import { chargeTokens } from "../core/state/token_limit.ts";
import { bodySent } from "../core/state/body_budget.ts";
import {
  bucketAdd,
  bucketEntries,
  bucketPark,
} from "../core/state/load_buckets.ts";

/** A numeric setting of the core's config. */
type NumericSetting = {
  [K in keyof Config]: Config[K] extends number ? K : never;
}[keyof Config];

/** The real reducer with one setting raised to `value`: the bound or guard it sets is gone. */
function settingRaised(key: NumericSetting, value: number): ReduceFn {
  return (state, event) => {
    if (state.config[key] < value) {
      state.config = { ...state.config, [key]: value };
    }
    return reduce(state, event);
  };
}

export type Mutant = {
  name: string;
  /** The promise it breaks. */
  breaks: string;
  /** A fresh broken reducer per run (mutants may keep memory). */
  make: () => ReduceFn;
  /** A named scenario that must catch it too (seeds 1-5), besides the default sweep. */
  scenario?: string;
};

/**
 * Issue 33.3's regression, in its cut form: an idle reader's bytes leave the
 * budget when the core orders the cut, not when the shell reports them let go.
 */
function releaseOnCut(): ReduceFn {
  return (state, event) => {
    const out = reduce(state, event);
    for (const f of out.effects) {
      if (f.kind === "cutResponse") bodySent(state, f.requestId);
    }
    return out;
  };
}

/** startStream forgets the worker's head: the client gets the SSE head. */
function dropStreamHead(): ReduceFn {
  return (state, event) => {
    const out = reduce(state, event);
    for (const f of out.effects) {
      if (f.kind === "startStream") delete f.head;
    }
    return out;
  };
}

function skipRequeueCap(): ReduceFn {
  return settingRaised("requeueCountMax", 1_000);
}

function lateChunks(): ReduceFn {
  const streamed = new Set<string>();
  return (state, event) => {
    const out = reduce(state, event);
    for (const f of out.effects) {
      if (f.kind === "startStream") streamed.add(f.requestId);
    }
    if (
      event.kind === "chunkReceived" && streamed.has(event.requestId) &&
      !state.requests.has(event.requestId)
    ) {
      out.effects.push({
        kind: "writeChunk",
        requestId: event.requestId,
        chunk: event.chunk,
      });
    }
    return out;
  };
}

function overDispatch(): ReduceFn {
  return (state, event) => {
    const out = reduce(state, event);
    if (event.kind === "registerReceived") {
      const w = state.workers.get(event.workerId);
      if (w !== undefined) w.maxConcurrent += 1;
    }
    return out;
  };
}

function cancelQueued(): ReduceFn {
  return (state, event) => {
    const r = event.kind === "clientDisconnected"
      ? state.requests.get(event.requestId)
      : undefined;
    const extra: Effect[] = [];
    if (r !== undefined && r.status.kind === "queued") {
      const w = state.workers.keys().next();
      if (w.done !== true) {
        extra.push({
          kind: "sendToWorker",
          workerId: w.value,
          message: {
            type: "cancel",
            request_id: r.id,
            reason: "client_disconnect",
          },
        });
      }
    }
    const out = reduce(state, event);
    out.effects.unshift(...extra);
    return out;
  };
}

function noRoundRobin(): ReduceFn {
  // Ties go to the worker that arrived at the level last instead of first.
  return (state: State, event) => {
    for (const byKey of state.routes.values()) {
      for (const b of byKey.values()) {
        for (const level of [...b.levels]) {
          const ids = [...bucketEntries(b)].filter(([l]) => l === level);
          for (const [, id] of ids) bucketPark(b, id);
          for (const [, id] of ids.reverse()) bucketAdd(b, level, id);
        }
      }
    }
    return reduce(state, event);
  };
}

function extendDeadlineOnRequeue(): ReduceFn {
  const extended = new Set<string>();
  return (state, event) => {
    const out = reduce(state, event);
    for (const r of state.requests.values()) {
      if (r.requeueCount > 0 && !extended.has(r.id)) {
        extended.add(r.id);
        r.deadlineAtMs += state.config.requestTimeoutMs;
      }
    }
    return out;
  };
}

function lateQueueTimeout(): ReduceFn {
  // Queued requests never time out: each tick pushes their queue deadline on.
  return (state, event) => {
    if (event.kind === "tick") {
      for (const r of state.requests.values()) {
        if (r.status.kind === "queued") {
          r.status.queueDeadlineAtMs = Math.max(
            r.status.queueDeadlineAtMs,
            event.atMs + 1,
          );
        }
      }
    }
    return reduce(state, event);
  };
}

// -- spec 004 scheduling and limits -------------------------------------------

function strictPriority(): ReduceFn {
  // Weights so lopsided that a higher class always goes first: low starves.
  return (state, event) => {
    if (state.config.priorityWeights.high < 1_000_000) {
      state.config = {
        ...state.config,
        priorityWeights: { high: 1_000_000, normal: 1_000, low: 1 },
      };
    }
    return reduce(state, event);
  };
}

function ignorePriority(): ReduceFn {
  // Every request lands in the normal class: plain FIFO across priorities.
  return (state, event) =>
    reduce(
      state,
      event.kind === "requestReceived"
        ? { ...event, priority: "normal" }
        : event,
    );
}

function fifoIgnoringTenants(): ReduceFn {
  // Within a class, the tenant holding the oldest request always goes first
  // (lanes re-sorted by their oldest request before every event): no round-robin.
  return (state, event) => {
    const seqOf = (lane: { byModel: Map<string, string[]> }): number => {
      let min = Infinity;
      for (const list of lane.byModel.values()) {
        const seq = state.requests.get(list[0]!)?.enqueueSeq ?? Infinity;
        if (seq < min) min = seq;
      }
      return min;
    };
    for (const q of state.queues.values()) {
      for (const cls of Object.values(q.classes)) {
        if (cls.tenants.size < 2) continue;
        const sorted = [...cls.tenants].sort((a, b) =>
          seqOf(a[1]) - seqOf(b[1])
        );
        cls.tenants.clear();
        for (const [t, lane] of sorted) cls.tenants.set(t, lane);
      }
    }
    return reduce(state, event);
  };
}

function rateCountsRefused(): ReduceFn {
  // A 429 is counted in the tenant's window as if it had been admitted.
  return (state, event) => {
    const out = reduce(state, event);
    if (event.kind !== "requestReceived") return out;
    const limited = out.effects.some((f) =>
      f.kind === "respondError" && f.error.code === "rate_limit_exceeded"
    );
    if (limited) {
      const tenant = event.tenant ?? "default";
      const times = state.rateWindows.get(tenant) ?? [];
      times.push(event.atMs);
      state.rateWindows.set(tenant, times);
    }
    return out;
  };
}

/** Takes a finished request's `tokens` back off its tenant's newest rate and budget buckets. */
function unchargeTenant(state: State, tenant: string, tokens: number): void {
  if (tokens === 0) return;
  for (const kind of ["rate", "budget"]) {
    const w = state.tokenWindows.get(`${kind}|tenant:${tenant}`);
    const last = w?.buckets[w.buckets.length - 1];
    if (w === undefined || last === undefined) continue;
    last.tokens -= tokens;
    w.total -= tokens;
  }
}

function tokensCountedAtAdmission(): ReduceFn {
  // Issue 26: a request's tokens charged when it is admitted (the prompt, all
  // that is known then) instead of when it finishes: long answers go uncounted.
  return (state, event) => {
    const out = reduce(state, event);
    for (const f of out.effects) {
      if (f.kind !== "requestFinished") continue;
      const tokens = (f.usage.prompt ?? 0) + (f.usage.completion ?? 0);
      unchargeTenant(state, f.tenant, tokens);
    }
    if (event.kind === "requestReceived") {
      const admitted = state.requests.get(event.requestId);
      if (admitted !== undefined) chargeTokens(state, admitted, 3);
    }
    return out;
  };
}

function streamsUncounted(): ReduceFn {
  // Issue 33: a stream is recorded as 0 tokens and charged nothing (what a
  // field named include_usage anywhere in the body did, and what the direct
  // path does in cluster mode).
  return (state, event) => {
    const streaming = event.kind === "completeReceived" &&
      state.requests.get(event.requestId)?.isStreaming === true;
    const out = reduce(state, event);
    if (!streaming) return out;
    for (const f of out.effects) {
      if (f.kind !== "requestFinished") continue;
      const tokens = (f.usage.prompt ?? 0) + (f.usage.completion ?? 0);
      f.usage = { ...f.usage, prompt: null, completion: null };
      unchargeTenant(state, f.tenant, tokens);
    }
    return out;
  };
}

function rateForgetsWindow(): ReduceFn {
  // A fixed window reset on every tick instead of a sliding one.
  return (state, event) => {
    if (event.kind === "tick") state.rateWindows.clear();
    return reduce(state, event);
  };
}

function tenantQueueUnbounded(): ReduceFn {
  return settingRaised("tenantQueueLenMax", 1_000_000);
}

function affinityIgnoresLoad(): ReduceFn {
  // The remembered worker wins however busy it is (no load guard).
  return settingRaised("affinityLoadMargin", 1_000_000);
}

// -- issue 9 protocol extensions and lifecycle tasks --------------------------------

function lifecycleToUnnegotiated(): ReduceFn {
  // Assumes every registered worker speaks lifecycle-v1 (negotiation skipped), so
  // lifecycle_request frames reach original-style workers.
  return (state, event) => {
    const out = reduce(state, event);
    if (event.kind === "registerReceived") {
      const w = state.workers.get(event.workerId);
      if (w !== undefined && !w.extensions.includes(EXTENSION_LIFECYCLE)) {
        w.extensions = [...w.extensions, EXTENSION_LIFECYCLE];
      }
    }
    return out;
  };
}

function ackExtensionsToOriginal(): ReduceFn {
  // Answers an original-style register as if it had listed an empty extension set.
  return (state, event) =>
    reduce(
      state,
      event.kind === "registerReceived" && event.extensions === undefined
        ? { ...event, extensions: [] }
        : event,
    );
}

function dropLifecycleCompletion(): ReduceFn {
  // A worker's "completed" report is lost: the part waits for its timeout instead.
  return (state, event) => {
    if (
      event.kind === "lifecycleProgressReceived" && event.status === "completed"
    ) {
      if (event.atMs > state.nowMs) state.nowMs = event.atMs;
      return { state, effects: [] };
    }
    return reduce(state, event);
  };
}

function noLifecycleTimeout(): ReduceFn {
  // A part whose worker never answers runs forever (no task deadline).
  return settingRaised("lifecycleTaskTimeoutMs", 1_000_000_000);
}

function lifecycleIgnoresTarget(): ReduceFn {
  // The operator's chosen worker is dropped: the core picks on its own.
  return (state, event) =>
    reduce(
      state,
      event.kind === "lifecycleRequested"
        ? { ...event, workerId: null }
        : event,
    );
}

// ---- issue 14: real backends and real faults ---------------------------------

function spliceErrorIntoStream(): ReduceFn {
  // The old core: a 4xx/5xx after the stream started was written as a chunk
  // and the stream ended normally.
  return (state, event) => {
    if (
      event.kind === "completeReceived" && event.statusCode >= 400 &&
      state.requests.get(event.requestId)?.status.kind === "streaming"
    ) return reduce(state, { ...event, statusCode: 200 });
    return reduce(state, event);
  };
}

function partialEventThenNext(): ReduceFn {
  // A relay that splits events: each stream's first chunk loses its blank
  // line (cut in the received event itself, so the chunk written is still the
  // worker's own), and the next chunk's event is glued onto an unfinished one
  // (C60).
  const cut = new Set<string>();
  return (state, event) => {
    if (
      event.kind === "chunkReceived" && !cut.has(event.requestId) &&
      state.requests.get(event.requestId)?.isStreaming === true
    ) {
      cut.add(event.requestId);
      const end = lastBlankLine(event.chunk);
      if (end > 0) event.chunk = event.chunk.slice(0, end);
    }
    return reduce(state, event);
  };
}

/** Where a chunk's trailing "\n\n" starts, or -1. */
function lastBlankLine(c: string | Uint8Array): number {
  const n = c.length;
  if (n < 2) return -1;
  const at = (i: number) => typeof c === "string" ? c.charCodeAt(i) : c[i]!;
  return at(n - 1) === 10 && at(n - 2) === 10 ? n - 2 : -1;
}

function requeueToSameWorker(): ReduceFn {
  // A refused request forgets which worker refused it, and no backend circuit opens.
  return (state, event) => {
    const out = reduce(state, event);
    for (const r of state.requests.values()) r.avoidWorkerId = null;
    for (const w of state.workers.values()) {
      if (w.backend.kind !== "closed" || w.backend.failures !== 0) {
        w.backend = { kind: "closed", failures: 0 };
      }
    }
    return out;
  };
}

function requeueOversized(): ReduceFn {
  // The old core: an oversized answer frame is a protocol error; the connection
  // closes and the request is requeued, to fail the same way elsewhere.
  return (state, event) => {
    if (
      event.kind === "workerFrameInvalid" && event.error.oversized !== undefined
    ) {
      return reduce(state, {
        ...event,
        error: { kind: event.error.kind, message: event.error.message },
      });
    }
    return reduce(state, event);
  };
}

function drainAsEmptyModels(): ReduceFn {
  // The old core: a worker's drain signal read as an empty model list (404s).
  // Withdrawn models would now wait out MODEL_GRACE_SECS (issue 24), so the
  // mutant forgets them as the old core did.
  return (state, event) => {
    if (event.kind === "modelsUpdateReceived" && event.draining === true) {
      const r = reduce(state, {
        kind: "modelsUpdateReceived",
        atMs: event.atMs,
        workerId: event.workerId,
        models: [],
        currentLoad: event.currentLoad,
      });
      for (const gone of r.state.modelsGone.values()) gone.clear();
      return r;
    }
    return reduce(state, event);
  };
}

// -- issue 25: which workers may take a request ----------------------------------

// The core forgets the worker's endpoint_prefixes and every worker of a model
// takes every path; a request may reach a worker that serves other paths only.
function ignoreEndpointPrefixes(): ReduceFn {
  return (state, event) => {
    const out = reduce(state, event);
    if (event.kind === "registerReceived") {
      const w = state.workers.get(event.workerId);
      if (w !== undefined) w.endpointPrefixes = [];
    }
    return out;
  };
}

export const MUTANTS: readonly Mutant[] = [
  {
    name: "skip_requeue_cap",
    breaks: "C23 at most 3 requeues",
    make: skipRequeueCap,
  },
  {
    name: "late_chunks",
    breaks: "C20 chunks after the end are dropped",
    make: lateChunks,
  },
  {
    name: "over_dispatch",
    breaks: "C8 in-flight never exceeds max_concurrent",
    make: overDispatch,
  },
  {
    name: "cancel_queued",
    breaks: "C18 no cancel for a queued request",
    make: cancelQueued,
  },
  {
    name: "no_round_robin",
    breaks: "C8 ties go round-robin",
    make: noRoundRobin,
  },
  {
    name: "extend_deadline_on_requeue",
    breaks: "C22 requeue never extends the deadline",
    make: extendDeadlineOnRequeue,
  },
  {
    name: "late_queue_timeout",
    breaks: "C12 queue timeout ends a queued request",
    make: lateQueueTimeout,
  },
  {
    name: "strict_priority",
    breaks: "004 low priority is never starved (stride weights)",
    make: strictPriority,
    scenario: "low_priority_burst_under_high",
  },
  {
    name: "ignore_priority",
    breaks: "004 higher classes go first (stride weights)",
    make: ignorePriority,
    scenario: "low_priority_burst_under_high",
  },
  {
    name: "fifo_ignoring_tenants",
    breaks: "004 tenants of a class take turns (fairness bound)",
    make: fifoIgnoringTenants,
    scenario: "noisy_tenant",
  },
  {
    name: "rate_counts_refused",
    breaks: "004 a 429 is not counted in the tenant's window",
    make: rateCountsRefused,
    scenario: "rate_limited_tenants",
  },
  {
    name: "rate_forgets_window",
    breaks: "004 the rate window slides over admission times",
    make: rateForgetsWindow,
    scenario: "rate_limited_tenants",
  },
  {
    name: "tokens_counted_at_admission",
    breaks: "issue 26 a request's tokens count when it finishes",
    make: tokensCountedAtAdmission,
  },
  {
    name: "streams_uncounted",
    breaks: "issue 33 every finished stream is counted and charged",
    make: streamsUncounted,
  },
  {
    name: "tenant_queue_unbounded",
    breaks: "004 per-tenant queue bound",
    make: tenantQueueUnbounded,
  },
  {
    name: "affinity_ignores_load",
    breaks: "004 cache affinity yields to a much less loaded worker",
    make: affinityIgnoresLoad,
  },
  {
    name: "lifecycle_to_unnegotiated",
    breaks: "I9 extension frames only to workers that listed the extension",
    make: lifecycleToUnnegotiated,
    scenario: "model_lifecycle",
  },
  {
    name: "ack_extensions_to_original",
    breaks:
      "I9 register_ack carries extensions only for workers that sent the field",
    make: ackExtensionsToOriginal,
    scenario: "model_lifecycle",
  },
  {
    name: "drop_lifecycle_completion",
    breaks: "I9 a worker's final report ends its part of the task",
    make: dropLifecycleCompletion,
    scenario: "model_lifecycle",
  },
  {
    name: "no_lifecycle_timeout",
    breaks: "I9 a task whose worker never answers fails by its timeout",
    make: noLifecycleTimeout,
    scenario: "model_lifecycle",
  },
  {
    name: "lifecycle_ignores_target",
    breaks: "I9 an operation naming a worker goes to that worker only",
    make: lifecycleIgnoresTarget,
    scenario: "model_lifecycle",
  },
  {
    name: "splice_error_into_stream",
    breaks: "issue 14.4 a failure after the first byte is an SSE error event",
    make: spliceErrorIntoStream,
    scenario: "real_faults",
  },
  {
    name: "partial_event_then_next",
    breaks:
      "issue 24.1 a stream never carries a partial event followed by another event",
    make: partialEventThenNext,
    scenario: "real_faults",
  },
  {
    name: "requeue_to_same_worker",
    breaks:
      "issue 14.3 a refused request is retried on another worker serving the model",
    make: requeueToSameWorker,
    scenario: "real_faults",
  },
  {
    name: "requeue_oversized",
    breaks:
      "issue 14.2 a request never runs twice because of its answer's size",
    make: requeueOversized,
    scenario: "real_faults",
  },
  {
    name: "drain_as_empty_models",
    breaks:
      "issue 14.1 a draining worker's models stay routable until it disconnects",
    make: drainAsEmptyModels,
    scenario: "real_faults",
  },
  {
    name: "drop_stream_head",
    breaks:
      "C108 a stream whose worker sent its head (stream-head-v1) opens with it",
    make: dropStreamHead,
  },
  {
    name: "ignore_endpoint_prefixes",
    breaks:
      "issue 25 a request goes only to a worker whose endpoint_prefixes match its path",
    make: ignoreEndpointPrefixes,
  },
  {
    name: "release_on_cut",
    breaks:
      "issue 33.3 an answer's bytes leave the budget only when its client's connection lets them go",
    make: releaseOnCut,
  },
];
