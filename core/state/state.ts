// The whole state of the relay core: plain objects and Maps keyed by id, owned by
// whoever holds it (shell or simulator) and updated in place by the reducer.
import type { Config, KeyRef, TokenLimit } from "../config.ts";

export type { KeyRef };
import type { LoadBuckets } from "./load_buckets.ts";
import type { RunnerCapabilities } from "../protocol/messages.ts";
import type {
  ClientApi,
  Headers,
  LifecycleTask,
  Priority,
  RequestId,
  StreamHead,
  WorkerId,
} from "../vocabulary.ts";

/** A socket that passed auth but has not sent `register` yet. */
export type PendingWorker = {
  id: WorkerId;
  provider: string;
  connectedAtMs: number;
  registerDeadlineAtMs: number;
};

export type Worker = {
  id: WorkerId;
  provider: string;
  name: string;
  /** Acked models in first-seen order (what register_ack echoed). */
  models: string[];
  /** O(1) membership for routing (C6, C7). `*` is kept out of it: see `wildcard`. */
  modelSet: Set<string>;
  /** Advertised `*`: serves any model, after exact matches (C42). */
  wildcard: boolean;
  maxConcurrent: number;
  /** Load the worker last reported (register, pong, models_update). */
  reportedLoad: number;
  /** Requests assigned to this worker and not yet ended. */
  inFlight: Set<RequestId>;
  /** Cancelled requests whose slot stays reserved until acked or the grace ends (C44). */
  cancelling: Map<RequestId, number>;
  draining: boolean;
  /**
   * The worker drains itself (drain-v1 `models_update` with `draining: true`):
   * it closes its own socket when done, so the server neither closes it when
   * idle nor sets a drain deadline.
   */
  selfDraining: boolean;
  drainDeadlineAtMs: number | null;
  /** Its backend's health as its scoped errors tell it (backend circuit, issue 14). */
  backend: BackendHealth;
  connectedAtMs: number;
  lastHeartbeatAtMs: number;
  nextPingAtMs: number;
  /** Dispatch sequence of the last request sent here (diagnostics and the simulator). */
  lastDispatchSeq: number;
  /** The load level this worker is filed under in `routes`, or null when it cannot take work. */
  routeLevel: number | null;
  /** The worker's protocol_version, echoed in register_ack (C39). */
  protocolVersion: string | null;
  /** Extensions both sides speak (listed in register and supported here), issue 9. */
  extensions: string[];
  /** The last `capabilities` frame (capabilities-v1), null until one arrives. */
  capabilities: RunnerCapabilities | null;
  capabilitiesAtMs: number | null;
  /**
   * The paths this worker serves, as prefixes (register's `endpoint_prefixes`,
   * issue 25); empty = every path.
   */
  endpointPrefixes: string[];
  /**
   * residency-v1 (issue 30): which models its backend holds; null until the
   * worker reports any (an original-dialect worker never does): then every
   * model it acked counts as loaded and it routes as before.
   */
  residency: Residency | null;
};

/**
 * The models resident on one worker's backend, as the core knows them
 * (residency.ts keeps it): the worker's reports, plus what the core itself
 * sent there since (a request for a model the backend does not hold starts
 * its load). Every acked model in neither map is `available`.
 */
export type Residency = {
  /** Loaded models -> when a request for it was last sent here; Map order is least recently used first. */
  loaded: Map<string, number>;
  /** Models being loaded -> since when. */
  loading: Map<string, number>;
  /** How many models the backend holds at once (MAX_RESIDENT_MODELS); null = no limit. */
  room: number | null;
  /** Models filed under this worker in `State.holders` (hot_routes.ts). */
  held: Set<string>;
  /**
   * Where it is filed in `State.hotRoutes`: its load level (null: parked there
   * while it cannot take work) and the models; null = nowhere.
   */
  filed: { level: number | null; models: Set<string> } | null;
  /**
   * Requests of its resident models sent here in a row while a model no
   * worker holds waited for room (the drain bound, `modelDrainMax`): at the
   * bound the worker stops taking its resident models' requests and lets that
   * model load (issue 30.3). Back to 0 when it starts a load.
   */
  drainRun: number;
};

/** Measured times of one model (issue 30): moving averages, null until measured. */
export type ModelTimes = {
  /** From a load's start (the request that started it, or the report) to loaded. */
  loadMsAvg: number | null;
  /** Dispatch to end of requests sent to a worker that had the model loaded. */
  serviceMsAvg: number | null;
};

/**
 * Backend circuit of one worker (issue 14): `failures` consecutive
 * `backend_unavailable` errors open it for `coolDownMs`; then one trial request
 * may go there; its success closes the circuit, its failure reopens it for twice
 * as long (bounded by config).
 */
export type BackendHealth =
  | { kind: "closed"; failures: number }
  | { kind: "open"; untilMs: number; coolDownMs: number }
  | { kind: "trial"; coolDownMs: number };

export type RequestStatus =
  | { kind: "queued"; queueDeadlineAtMs: number }
  | {
    kind: "dispatched";
    workerId: WorkerId;
    dispatchedAtMs: number;
    /**
     * stream-head-v1 (issue 25): the head this dispatch's worker sent before
     * its first chunk; a requeue drops it with the dispatch.
     */
    head?: StreamHead;
  }
  | {
    kind: "streaming";
    workerId: WorkerId;
    dispatchedAtMs: number;
    firstByteAtMs: number;
    lastChunkAtMs: number;
    charsStreamed: number;
  };

/**
 * A request the core still owes an answer. Ended requests (done, failed,
 * cancelled) are removed at once: their outcome leaves in a `requestFinished`
 * effect, so memory never grows with history.
 */
export type Request = {
  id: RequestId;
  provider: string;
  api: ClientApi;
  endpointPath: string;
  /** The client's HTTP method, sent in the `request` frame (issue 25). */
  method: string;
  model: string;
  isStreaming: boolean;
  /** The client's body: text, or base64 when `bodyBase64` (not UTF-8, issue 25). */
  body: string;
  /** The body is not text: only a worker with body-bytes-v1 can carry it. */
  bodyBase64: boolean;
  headers: Headers;
  arrivedAtMs: number;
  /** arrival + REQUEST_TIMEOUT: never extended by requeue (C19, C22). */
  deadlineAtMs: number;
  /** Position in FIFO order, kept across requeues (C22). */
  enqueueSeq: number;
  requeueCount: number;
  /** Total ms spent queued (for X-Queue-Wait-Ms and metrics). */
  queueWaitMs: number;
  queuedAtMs: number;
  /** When the request entered the queue, i.e. arrived: its queue deadline counts from here, requeues included (C22, issue 14.8). */
  firstQueuedAtMs: number | null;
  /**
   * The worker whose scoped error or backend failure sent this request back to
   * the queue: another worker serving the model is preferred (issue 14).
   */
  avoidWorkerId: WorkerId | null;
  /**
   * Pieces received for a non-streaming request (body-chunks-v1), kept as
   * UTF-8 bytes in the order they came, never joined (issue 24), and sent before the final
   * body; `bodyBytes` is their size, counted in `State.bodyBytesBuffered`.
   */
  bodyPieces: Uint8Array[];
  bodyBytes: number;
  tenant: string;
  priority: Priority;
  /** Cache affinity key, null when none or X-Cache-Mode: none. */
  cacheKey: string | null;
  status: RequestStatus;
  /** The API key it was made with (issue 26), null when keys are not required. */
  key: KeyRef | null;
  /** The model the client named (an alias of `model`, or `model` itself). */
  modelAsked: string;
  /**
   * Issue 30: its dispatch went to a worker that did not hold its model yet
   * (it started or joined a load there), so no byte comes before the load
   * ends; false when sent to a worker holding it, or queued.
   */
  waitsForLoad: boolean;
  /**
   * Content deltas streamed so far, counted only for a chat or completions
   * stream that did not ask for usage (issue 26: the estimate); null = not counted.
   */
  deltas: number | null;
  /** The prompt's tokens estimated from the body (issue 33); 0 = unknown. */
  promptEstimate: number;
  /**
   * Tokens held on the request's token limits from admission to its end
   * (issue 33: prompt estimate plus max_tokens), released when it is charged.
   */
  tokensReserved: number;
  /** Issue 30: lines for a waiting stream (keep-alive, progress); null = none. */
  waitLines: WaitLines | null;
};

/** Issue 30: a waiting stream's keep-alive and progress lines (wait_lines.ts). */
export type WaitLines = {
  /** X-ModelRelay-Progress: 1 */
  progress: boolean;
  /** The relay's SSE head went out with the first line. */
  opened: boolean;
  /** When the next `: keep-alive` is due; null = keep-alive off. */
  nextKeepAliveAtMs: number | null;
  /** The last progress line written (without `: `), so only changes go out. */
  lastNote: string | null;
};

/**
 * Tokens charged to one token limit's sliding window (issue 26, token_limit.ts):
 * oldest bucket first, each `bucketMs` wide.
 */
export type TokenWindow = {
  limit: TokenLimit;
  bucketMs: number;
  buckets: Array<{ atMs: number; tokens: number }>;
  total: number;
  /** Tokens reserved by the requests in flight on this window (issue 33). */
  reserved: number;
};

/** One tenant's queued requests within a priority class: a FIFO per model, by `enqueueSeq`. */
export type TenantLane = { length: number; byModel: Map<string, RequestId[]> };

/** One priority class: stride-scheduling pass and tenants in round-robin order. */
export type ClassQueue = {
  pass: number;
  length: number;
  tenants: Map<string, TenantLane>;
};

/**
 * Per-provider queue (C9, C10, spec 004): priority classes, then tenants in
 * round-robin, then per-model FIFOs. `queue.ts` holds every rule over it.
 */
export type ProviderQueue = {
  length: number;
  classes: Record<Priority, ClassQueue>;
  /** Queued requests per model: which models a free worker could help. */
  models: Map<string, number>;
  /** Queued requests per tenant (the per-tenant bound). */
  tenants: Map<string, number>;
  /** Stride-scheduling virtual time: the pass of the last class served. */
  vnow: number;
};

export type State = {
  config: Config;
  nowMs: number;
  /**
   * Bumped by `reduce` for every event: two reads at the same version (and
   * `nowMs`) see the same state, so a view may be kept until it moves.
   */
  version: number;
  pending: Map<WorkerId, PendingWorker>;
  workers: Map<WorkerId, Worker>;
  /** provider -> model -> workers that acked it (exact names). */
  modelIndex: Map<string, Map<string, Set<WorkerId>>>;
  /**
   * provider -> model -> when its last worker left or withdrew it (issue 24):
   * within `modelGraceMs` a request for it queues instead of 404. Entries
   * leave when a worker serves the model again or the grace has passed.
   */
  modelsGone: Map<string, Map<string, number>>;
  /** provider -> workers that advertised `*`. */
  wildcardIndex: Map<string, Set<WorkerId>>;
  /** provider -> model (or `*`) -> routable workers by load level (C7, C8). */
  routes: Map<string, Map<string, LoadBuckets>>;
  requests: Map<RequestId, Request>;
  queues: Map<string, ProviderQueue>;
  /** client IP -> times of recent failed worker auth attempts (C2). */
  authFailures: Map<string, number[]>;
  dispatchSeq: number;
  enqueueSeq: number;
  shuttingDown: boolean;
  shutdownDeadlineAtMs: number | null;
  shutdownCompleted: boolean;
  /** tenant -> admission times inside the current window (sliding-window rate limit). */
  rateWindows: Map<string, number[]>;
  /** API key id -> admission times inside its request-rate window (issue 26). */
  keyRateWindows: Map<string, number[]>;
  /** `rate|tenant:<t>`, `budget|key:<id>`… -> tokens charged in the window (issue 26). */
  tokenWindows: Map<string, TokenWindow>;
  /** provider|model|cacheKey -> worker that served it last; Map order is the LRU order. */
  affinity: Map<string, WorkerId>;
  /** Moving averages of dispatch-to-end and queue-wait times (Retry-After estimate). */
  serviceMsAvg: number;
  queueWaitMsAvg: number;
  /** Issue 30: provider|model -> measured load and service times (routing.ts weighs them). */
  modelTimes: Map<string, ModelTimes>;
  /** Issue 30: workers that reported residency, so routing without any keeps today's path. */
  residencyWorkers: number;
  /**
   * Issue 30 (hot_routes.ts): provider -> model -> routable workers that
   * reported residency and hold the model loaded, by load level.
   */
  hotRoutes: Map<string, Map<string, LoadBuckets>>;
  /** Issue 30: provider|model -> workers that reported holding or loading it. */
  holders: Map<string, Set<WorkerId>>;
  /** Lifecycle tasks (issue 9) in creation order; bounded by `lifecycleTasksMax`. */
  lifecycleTasks: Map<string, LifecycleTask>;
  /**
   * Running tasks whose caller waits for the end: task id -> when it is
   * answered 202 with the task document instead (`lifecycleReplyWaitMs`).
   */
  lifecycleReplies: Map<string, number>;
  /**
   * Size of every request's `bodyPieces` together (issue 24): the fleet-wide
   * budget MAX_BUFFERED_RESPONSE_BYTES is checked against it.
   */
  bodyBytesBuffered: number;
  /** `bodyBytesBuffered` by tenant (TENANT_MAX_BUFFERED_RESPONSE_BYTES, issue 33.3). */
  bodyBytesByTenant: Map<string, number>;
  /**
   * Answers handed to the shell in pieces and not yet written out
   * (body_budget.ts). Their unsent bytes stay in the budget until the shell
   * says it let them go, so a slow reader cannot step around it.
   */
  bodiesSending: Map<RequestId, BodySending>;
};

/** One answer the shell is writing out (body_budget.ts). */
export type BodySending = {
  tenant: string;
  /** Bytes still held by the shell, counted in the budget. */
  bytes: number;
  /** Bytes the shell reported written so far. */
  written: number;
  /** Hand-over, or the last write progress. */
  progressAtMs: number;
  /** When the core told the shell to cut it (no progress), else null. */
  cutAtMs: number | null;
};

export function emptyQueue(): ProviderQueue {
  const cls = (): ClassQueue => ({ pass: 0, length: 0, tenants: new Map() });
  return {
    length: 0,
    classes: { high: cls(), normal: cls(), low: cls() },
    models: new Map(),
    tenants: new Map(),
    vnow: 0,
  };
}

export function initialState(config: Config, nowMs = 0): State {
  const queues = new Map<string, ProviderQueue>();
  const modelIndex = new Map<string, Map<string, Set<WorkerId>>>();
  const wildcardIndex = new Map<string, Set<WorkerId>>();
  const modelsGone = new Map<string, Map<string, number>>();
  const routes = new Map<string, Map<string, LoadBuckets>>();
  for (const p of config.providers) {
    routes.set(p.name, new Map());
    queues.set(p.name, emptyQueue());
    modelIndex.set(p.name, new Map());
    wildcardIndex.set(p.name, new Set());
    modelsGone.set(p.name, new Map());
  }
  return {
    config,
    nowMs,
    version: 0,
    pending: new Map(),
    workers: new Map(),
    modelIndex,
    modelsGone,
    wildcardIndex,
    routes,
    requests: new Map(),
    queues,
    authFailures: new Map(),
    dispatchSeq: 0,
    enqueueSeq: 0,
    shuttingDown: false,
    shutdownDeadlineAtMs: null,
    shutdownCompleted: false,
    rateWindows: new Map(),
    keyRateWindows: new Map(),
    tokenWindows: new Map(),
    affinity: new Map(),
    serviceMsAvg: 0,
    queueWaitMsAvg: 0,
    modelTimes: new Map(),
    residencyWorkers: 0,
    hotRoutes: new Map(),
    holders: new Map(),
    lifecycleTasks: new Map(),
    lifecycleReplies: new Map(),
    bodyBytesBuffered: 0,
    bodyBytesByTenant: new Map(),
    bodiesSending: new Map(),
  };
}
