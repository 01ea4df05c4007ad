// One simulated run: a discrete-event queue on a virtual clock drives the very
// same `reduce` the server runs (conventions §6). Each step pops one action; a
// core event is reduced, its effects are hashed, checked by the observer and
// handed to the virtual workers and clients, which schedule their reactions
// with delays drawn from the one seeded PRNG. Faults stop at `faultsEndMs`;
// then the heal phase must end every request within a bounded horizon.
import {
  type Config,
  type Effect,
  type Event,
  eventFromBinaryFrame,
  eventFromFrame,
  initialState,
  makeConfig,
  reduce,
  type State,
} from "../core/mod.ts";
import { EventQueue } from "./event_queue.ts";
import {
  Observer,
  observerConfigOf,
  type SchedStats,
  type Violation,
} from "./observer/mod.ts";
import { Prng } from "./prng.ts";
import {
  type ClientSpec,
  type Scenario,
  SIM_CONFIG_DEFAULTS,
} from "./scenario.ts";
import type { LifecycleOperation } from "../core/mod.ts";
import { effectLine, eventLine, TraceHash } from "./trace.ts";
import { VirtualClient } from "./virtual_client.ts";
import { VirtualWorker } from "./virtual_worker.ts";
import type { Action, World } from "./world.ts";

export type ReduceFn = (
  state: State,
  event: Event,
) => { state: State; effects: Effect[] };

export type RunOptions = {
  /** A mutant reducer (sim/mutants.ts); the real one by default. */
  reduce?: ReduceFn;
  /** Keep every trace line (for failure reports). */
  trace?: boolean;
  /** Step bound: exceeding it is a liveness failure, never a hang. */
  maxSteps?: number;
};

export type RunResult = {
  ok: boolean;
  violation: Violation | null;
  /** Index of the failing step and its event line. */
  step: number;
  failingEvent: string | null;
  atMs: number;
  hash: string;
  events: number;
  checks: number;
  trace: string[];
  /** Spec 004 scheduling measurements (dispatches per class, waits per tenant, 429s). */
  sched: SchedStats;
  /** Lifecycle task counts (issue 9): requested, sent, completed, failed, refused, timed out, worker left. */
  lifecycle: Observer["lifecycle"];
};

export function simConfig(s: Scenario): Config {
  return makeConfig({ ...SIM_CONFIG_DEFAULTS, ...s.config });
}

/** Expands the parametric load into concrete clients with the clients' PRNG. */
export function expandClients(s: Scenario, prng: Prng): ClientSpec[] {
  const out: ClientSpec[] = [...s.clients];
  for (const l of s.load) {
    for (let i = 0; i < l.count; i++) {
      const abort = prng.chance(l.abortPct, 100);
      const byChunks = prng.chance(1, 2);
      const c: ClientSpec = {
        atMs: prng.int(l.fromMs, l.toMs),
        model: prng.pick(l.models),
        streaming: prng.chance(l.streamingPct, 100),
        abortAfterChunks: abort && byChunks ? prng.int(1, 4) : null,
        abortAfterMs: abort && !byChunks ? prng.int(1, 3_000) : null,
        stall: abort && prng.chance(1, 6),
      };
      // Spec 004 fields draw only when the load sets them, so older loads keep their runs.
      if (l.tenants !== undefined) c.tenant = prng.pick(l.tenants);
      if (l.priorities !== undefined) c.priority = prng.pick(l.priorities);
      if (l.cacheKeys !== undefined) c.cacheKey = prng.pick(l.cacheKeys);
      out.push(c);
    }
  }
  // Stable sort: equal times keep their listed order.
  return out.map((c, i) => ({ c, i }))
    .sort((a, b) => a.c.atMs - b.c.atMs || a.i - b.i)
    .map((x) => x.c);
}

/** One lifecycle operation an operator issues (issue 9). */
export type OperatorOp = {
  atMs: number;
  operation: LifecycleOperation;
  modelId: string | null;
  params: Record<string, unknown>;
  /** A worker's spec name (resolved to its connection when issued), or null: the core picks. */
  target: string | null;
};

/** Expands the operators into concrete operations with their own PRNG stream. */
export function expandOperators(
  s: Scenario,
  prng: Prng,
  workerNames: readonly string[],
): OperatorOp[] {
  const out: OperatorOp[] = [];
  for (const o of s.operators ?? []) {
    for (let i = 0; i < o.count; i++) {
      const roll = prng.int(0, 99);
      const operation: LifecycleOperation = roll < o.loadPct
        ? "model-load"
        : roll < o.loadPct + o.unloadPct
        ? "model-unload"
        : "cache-flush";
      const model = prng.pick(o.models);
      const scoped = operation !== "cache-flush" || prng.chance(1, 2);
      const params: Record<string, unknown> = operation === "cache-flush"
        ? (scoped
          ? { scope: "model" }
          : prng.chance(1, 2)
          ? { scope: "all" }
          : {})
        : {};
      out.push({
        atMs: prng.int(o.fromMs, o.toMs),
        operation,
        modelId: scoped ? model : null,
        params,
        target: workerNames.length > 0 && prng.chance(o.targetPct, 100)
          ? prng.pick(workerNames)
          : null,
      });
    }
  }
  return out;
}

/** One run's moving parts, shared by the planner, the effect router and the action handler. */
type Run = {
  scenario: Scenario;
  config: Config;
  options: RunOptions;
  state: State;
  queue: EventQueue<Action>;
  hash: TraceHash;
  trace: string[];
  observer: Observer;
  /** Connections the server closed or refused. */
  closed: Set<string>;
  requestIds: string[];
  /** Request id -> the connection whose chunk started its stream. */
  streamingOn: Map<string, string>;
  workers: VirtualWorker[];
  clients: VirtualClient[];
  clientById: Map<string, VirtualClient>;
  ops: OperatorOp[];
  now: number;
  steps: number;
  arrived: number;
  issued: number;
  currentEvent: Event | null;
  failingEvent: string | null;
};

export function runScenario(
  scenario: Scenario,
  seed: bigint,
  options: RunOptions = {},
): RunResult {
  const run = startRun(scenario, seed, options);
  const { queue, observer, config } = run;
  const maxSteps = options.maxSteps ?? 1_000_000;
  const horizonMs = plan(run);
  for (;;) {
    if (observer.violation !== null) break;
    const item = queue.pop();
    if (item === null) break;
    run.now = item.atMs;
    if (
      run.arrived === run.clients.length && observer.openCount === 0 &&
      run.issued === run.ops.length && observer.openTasks === 0 &&
      run.now >= scenario.faultsEndMs
    ) break;
    if (run.now > horizonMs || run.steps >= maxSteps) {
      observer.failLiveness(
        `${observer.openCount} request(s) and ${observer.openTasks} lifecycle task(s) still open at ${run.now} ms after ${run.steps} steps (horizon ${horizonMs} ms, step bound ${maxSteps})`,
      );
      run.failingEvent = `${run.now} (liveness bound)`;
      break;
    }
    perform(run, item.item, config);
  }
  if (
    observer.violation === null &&
    (observer.openCount > 0 || observer.openTasks > 0)
  ) {
    observer.failLiveness(
      `${observer.openCount} request(s) and ${observer.openTasks} lifecycle task(s) never ended`,
    );
    run.failingEvent = `${run.now} (end of run)`;
  }
  const v = observer.violation as Violation | null;
  return {
    ok: v === null,
    violation: v,
    step: run.steps,
    failingEvent: run.failingEvent,
    atMs: run.now,
    hash: run.hash.hex(),
    events: run.steps,
    checks: observer.checks,
    trace: run.trace,
    sched: observer.sched,
    lifecycle: observer.lifecycle,
  };
}

/**
 * The run's state, world, workers, clients and operators. The PRNG streams are
 * forked in a fixed order (clients, each worker, then operators only when the
 * scenario has any), so a run is the same for the same seed.
 */
function startRun(scenario: Scenario, seed: bigint, options: RunOptions): Run {
  const config = simConfig(scenario);
  const root = Prng.fromSeed(seed);
  const clientPrng = root.fork();
  const run: Run = {
    scenario,
    config,
    options,
    state: initialState(config, 0),
    queue: new EventQueue<Action>(),
    hash: new TraceHash(),
    trace: [],
    observer: new Observer(observerConfigOf(config), scenario.tickMs),
    closed: new Set(),
    requestIds: [],
    streamingOn: new Map(),
    workers: [],
    clients: [],
    clientById: new Map(),
    ops: [],
    now: 0,
    steps: 0,
    arrived: 0,
    issued: 0,
    currentEvent: null,
    failingEvent: null,
  };
  const world: World = {
    schedule(atMs: number, action: Action): void {
      run.queue.push(atMs < run.now ? run.now : atMs, action);
    },
    faultsOn: (atMs: number) => atMs < scenario.faultsEndMs,
    foreignRequestIds: (conn: string) =>
      run.requestIds.filter((id) => {
        if (run.clientById.get(id)?.ended === true) return true;
        const on = run.streamingOn.get(id);
        return on !== undefined && on !== conn;
      }),
    connClosed: (conn: string) => run.closed.has(conn),
    frameCharsMax: config.frameCharsMax,
    streamCharsMax: config.streamCharsMax,
  };
  run.workers = scenario.workers.map((w, i) =>
    new VirtualWorker(w, i, root.fork(), world)
  );
  // Forked last and only when used, so runs without operators keep their streams.
  run.ops = (scenario.operators ?? []).length === 0 ? [] : expandOperators(
    scenario,
    root.fork(),
    run.workers.map((w) => w.spec.name),
  );
  run.clients = expandClients(scenario, clientPrng).map((c, i) =>
    new VirtualClient(c, `r${i}`, world)
  );
  run.clientById = new Map(run.clients.map((c) => [c.requestId, c]));
  return run;
}

/**
 * Queues the plan — workers, their timed faults, clients, heal, shutdown,
 * operators, the first tick — and returns the horizon past which a request
 * still open is a liveness failure.
 */
function plan(run: Run): number {
  const { scenario, queue, config } = run;
  let maxStreamMs = 0;
  run.workers.forEach((w, i) => {
    const s = w.spec;
    queue.push(s.connectAtMs, {
      kind: "host",
      host: i,
      what: "connect",
      fault: -1,
    });
    s.faults.forEach((f, k) => {
      const at = "atMs" in f ? f.atMs : null;
      if (at !== null) {
        queue.push(at, { kind: "host", host: i, what: "fault", fault: k });
      }
    });
    queue.push(scenario.faultsEndMs, {
      kind: "host",
      host: i,
      what: "connect",
      fault: -1,
    });
    maxStreamMs = Math.max(
      maxStreamMs,
      s.firstChunkMs[1] + s.chunks[1] * (s.chunkGapMs[1] + s.netDelayMs[1]) +
        3 * s.netDelayMs[1],
    );
  });
  run.clients.forEach((c, i) =>
    queue.push(c.spec.atMs, { kind: "arrive", client: i })
  );
  if (scenario.shutdownAtMs !== null) {
    queue.push(scenario.shutdownAtMs, {
      kind: "core",
      event: { kind: "shutdownRequested", atMs: scenario.shutdownAtMs },
    });
  }
  run.ops.forEach((o, i) => queue.push(o.atMs, { kind: "operator", op: i }));
  queue.push(scenario.tickMs, { kind: "tick" });

  const lastArrival = run.clients.reduce((m, c) => Math.max(m, c.spec.atMs), 0);
  const lastOp = run.ops.reduce((m, o) => Math.max(m, o.atMs), 0);
  return Math.max(
    scenario.faultsEndMs,
    lastArrival,
    lastOp,
    scenario.shutdownAtMs ?? 0,
  ) +
    config.requestTimeoutMs + config.queueTimeoutMs + maxStreamMs +
    config.drainTimeoutMs +
    config.heartbeatTimeoutMs + 4 * scenario.tickMs +
    (run.ops.length === 0 ? 0 : config.lifecycleTaskTimeoutMs);
}

/** One core event: hashed, checked before and after, reduced, its effects routed in order. */
function step(run: Run, event: Event): void {
  const { hash, trace, observer, options } = run;
  run.steps++;
  run.currentEvent = event;
  const line = eventLine(event);
  hash.line(line);
  if (options.trace) trace.push(line);
  observer.beforeStep(event);
  const { effects } = (options.reduce ?? reduce)(run.state, event);
  for (const f of effects) {
    const fl = effectLine(f);
    hash.line(fl);
    if (options.trace) trace.push(fl);
    observer.effect(f);
    routeEffect(run, f);
  }
  observer.afterStep(run.state);
  if (observer.violation !== null && run.failingEvent === null) {
    run.failingEvent = line;
  }
}

/** An effect to the virtual worker or client it concerns. */
function routeEffect(run: Run, f: Effect): void {
  switch (f.kind) {
    case "acceptWorker":
    case "rejectWorker":
    case "sendToWorker":
    case "closeWorker": {
      if (f.kind === "rejectWorker" || f.kind === "closeWorker") {
        run.closed.add(f.workerId);
      }
      const host = connHost(run, f.workerId);
      if (host !== undefined && host.conn === f.workerId) {
        host.onEffect(run.now, f);
      }
      return;
    }
    case "startStream": {
      const e = run.currentEvent;
      if (e?.kind === "chunkReceived") {
        run.streamingOn.set(f.requestId, e.workerId);
      }
      run.clientById.get(f.requestId)?.onEffect(run.now, f);
      return;
    }
    case "respond":
    case "respondError":
    case "writeChunk":
    case "endStream":
    case "cutResponse":
      run.clientById.get(f.requestId)?.onEffect(run.now, f);
      return;
    default:
      return;
  }
}

/** The virtual worker host a connection id (`name.n`) belongs to. */
function connHost(run: Run, conn: string): VirtualWorker | undefined {
  const name = conn.slice(0, conn.lastIndexOf("."));
  return run.workers.find((w) => w.spec.name === name);
}

/** One action off the queue, at `run.now`. */
function perform(run: Run, a: Action, config: Config): void {
  const { now, workers } = run;
  switch (a.kind) {
    case "tick":
      step(run, { kind: "tick", atMs: now });
      run.queue.push(now + run.scenario.tickMs, { kind: "tick" });
      return;
    case "core": {
      const e = a.event;
      if (e.kind === "clientDisconnected" || e.kind === "clientStalled") {
        if (run.clientById.get(e.requestId)?.wantsAbort() !== true) return;
      }
      return step(run, e);
    }
    case "frame":
      if (run.closed.has(a.conn)) return; // the server stopped reading that socket
      return step(
        run,
        eventFromFrame(a.conn, now, a.text, config.frameCharsMax),
      );
    case "binaryFrame":
      if (run.closed.has(a.conn)) return;
      return step(
        run,
        eventFromBinaryFrame(a.conn, now, a.bytes, config.frameCharsMax),
      );
    case "job":
      return workers[a.host]!.onJob(now, a.conn, a.requestId);
    case "lifecycle":
      return workers[a.host]!.onLifecycle(now, a.conn, a.taskId);
    case "timer":
      return workers[a.host]!.onTimer(now, a.conn, a.timer, a.gen);
    case "operator":
      return issue(run, a.op);
    case "host": {
      const w = workers[a.host]!;
      if (a.what === "fault") return w.onFault(now, a.fault);
      if (a.fault === -1 && now >= run.scenario.faultsEndMs) w.heal(now);
      else w.connect(now);
      return;
    }
    case "arrive": {
      const c = run.clients[a.client]!;
      run.arrived++;
      run.requestIds.push(c.requestId);
      c.arrive(now);
      return;
    }
  }
}

/** Operator operation `op` reaches the core as a lifecycleRequested event. */
function issue(run: Run, op: number): void {
  const o = run.ops[op]!;
  run.issued++;
  const target = o.target === null
    ? null
    : (run.workers.find((w) => w.spec.name === o.target)?.conn ??
      `${o.target}.0`);
  step(run, {
    kind: "lifecycleRequested",
    atMs: run.now,
    taskId: `op${op}`,
    operation: o.operation,
    modelId: o.modelId,
    params: o.params,
    workerId: target,
    replyWanted: false,
  });
}
