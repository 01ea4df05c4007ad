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

export function runScenario(
  scenario: Scenario,
  seed: bigint,
  options: RunOptions = {},
): RunResult {
  const config = simConfig(scenario);
  const reduceFn = options.reduce ?? reduce;
  const maxSteps = options.maxSteps ?? 1_000_000;
  const state = initialState(config, 0);
  const root = Prng.fromSeed(seed);
  const clientPrng = root.fork();
  const queue = new EventQueue<Action>();
  const hash = new TraceHash();
  const trace: string[] = [];
  const closed = new Set<string>();
  const requestIds: string[] = [];
  const streamingOn = new Map<string, string>();
  const observer = new Observer(observerConfigOf(config), scenario.tickMs);
  let now = 0;

  const world: World = {
    schedule(atMs: number, action: Action): void {
      queue.push(atMs < now ? now : atMs, action);
    },
    faultsOn: (atMs: number) => atMs < scenario.faultsEndMs,
    foreignRequestIds: (conn: string) =>
      requestIds.filter((id) => {
        if (clientById.get(id)?.ended === true) return true;
        const on = streamingOn.get(id);
        return on !== undefined && on !== conn;
      }),
    connClosed: (conn: string) => closed.has(conn),
    frameCharsMax: config.frameCharsMax,
    streamCharsMax: config.streamCharsMax,
  };

  const workers = scenario.workers.map((w, i) =>
    new VirtualWorker(w, i, root.fork(), world)
  );
  const connHost = (conn: string): VirtualWorker | undefined => {
    const dot = conn.lastIndexOf(".");
    const name = conn.slice(0, dot);
    return workers.find((w) => w.spec.name === name);
  };
  // Forked last and only when used, so runs without operators keep their streams.
  const ops = (scenario.operators ?? []).length === 0
    ? []
    : expandOperators(scenario, root.fork(), workers.map((w) => w.spec.name));
  const specs = expandClients(scenario, clientPrng);
  const clients = specs.map((c, i) => new VirtualClient(c, `r${i}`, world));
  const clientById = new Map(clients.map((c) => [c.requestId, c]));

  // Plan: workers, their timed faults, clients, heal, shutdown, the first tick.
  let maxStreamMs = 0;
  workers.forEach((w, i) => {
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
  clients.forEach((c, i) =>
    queue.push(c.spec.atMs, { kind: "arrive", client: i })
  );
  if (scenario.shutdownAtMs !== null) {
    queue.push(scenario.shutdownAtMs, {
      kind: "core",
      event: { kind: "shutdownRequested", atMs: scenario.shutdownAtMs },
    });
  }
  ops.forEach((o, i) => queue.push(o.atMs, { kind: "operator", op: i }));
  queue.push(scenario.tickMs, { kind: "tick" });

  const lastArrival = specs.reduce((m, c) => Math.max(m, c.atMs), 0);
  const lastOp = ops.reduce((m, o) => Math.max(m, o.atMs), 0);
  const horizonMs = Math.max(
    scenario.faultsEndMs,
    lastArrival,
    lastOp,
    scenario.shutdownAtMs ?? 0,
  ) +
    config.requestTimeoutMs + config.queueTimeoutMs + maxStreamMs +
    config.drainTimeoutMs +
    config.heartbeatTimeoutMs + 4 * scenario.tickMs +
    (ops.length === 0 ? 0 : config.lifecycleTaskTimeoutMs);

  let steps = 0;
  let arrived = 0;
  let issued = 0;
  let failingEvent: string | null = null;

  const route = (f: Effect): void => {
    switch (f.kind) {
      case "acceptWorker":
      case "rejectWorker":
      case "sendToWorker":
      case "closeWorker": {
        if (f.kind === "rejectWorker" || f.kind === "closeWorker") {
          closed.add(f.workerId);
        }
        const host = connHost(f.workerId);
        if (host !== undefined && host.conn === f.workerId) {
          host.onEffect(now, f);
        }
        return;
      }
      case "startStream":
        if (currentEvent?.kind === "chunkReceived") {
          streamingOn.set(f.requestId, currentEvent.workerId);
        }
        clientById.get(f.requestId)?.onEffect(now, f);
        return;
      case "respond":
      case "respondError":
      case "writeChunk":
      case "endStream":
        clientById.get(f.requestId)?.onEffect(now, f);
        return;
      default:
        return;
    }
  };

  let currentEvent: Event | null = null;
  const step = (event: Event): void => {
    steps++;
    currentEvent = event;
    const line = eventLine(event);
    hash.line(line);
    if (options.trace) trace.push(line);
    observer.beforeStep(event);
    const { effects } = reduceFn(state, event);
    for (const f of effects) {
      const fl = effectLine(f);
      hash.line(fl);
      if (options.trace) trace.push(fl);
      observer.effect(f);
      route(f);
    }
    observer.afterStep(state);
    if (observer.violation !== null && failingEvent === null) {
      failingEvent = line;
    }
  };

  for (;;) {
    if (observer.violation !== null) break;
    const item = queue.pop();
    if (item === null) break;
    now = item.atMs;
    if (
      arrived === clients.length && observer.openCount === 0 &&
      issued === ops.length && observer.openTasks === 0 &&
      now >= scenario.faultsEndMs
    ) break;
    if (now > horizonMs || steps >= maxSteps) {
      observer.failLiveness(
        `${observer.openCount} request(s) and ${observer.openTasks} lifecycle task(s) still open at ${now} ms after ${steps} steps (horizon ${horizonMs} ms, step bound ${maxSteps})`,
      );
      failingEvent = `${now} (liveness bound)`;
      break;
    }
    const a = item.item;
    switch (a.kind) {
      case "tick":
        step({ kind: "tick", atMs: now });
        queue.push(now + scenario.tickMs, { kind: "tick" });
        break;
      case "core": {
        const e = a.event;
        if (e.kind === "clientDisconnected" || e.kind === "clientStalled") {
          if (clientById.get(e.requestId)?.wantsAbort() !== true) break;
        }
        step(e);
        break;
      }
      case "frame":
        if (closed.has(a.conn)) break; // the server stopped reading that socket
        step(eventFromFrame(a.conn, now, a.text, config.frameCharsMax));
        break;
      case "binaryFrame":
        if (closed.has(a.conn)) break;
        step(
          eventFromBinaryFrame(a.conn, now, a.bytes, config.frameCharsMax),
        );
        break;
      case "job":
        workers[a.host]!.onJob(now, a.conn, a.requestId);
        break;
      case "lifecycle":
        workers[a.host]!.onLifecycle(now, a.conn, a.taskId);
        break;
      case "timer":
        workers[a.host]!.onTimer(now, a.conn, a.timer, a.gen);
        break;
      case "operator": {
        const o = ops[a.op]!;
        issued++;
        const target = o.target === null
          ? null
          : (workers.find((w) => w.spec.name === o.target)?.conn ??
            `${o.target}.0`);
        step({
          kind: "lifecycleRequested",
          atMs: now,
          taskId: `op${a.op}`,
          operation: o.operation,
          modelId: o.modelId,
          params: o.params,
          workerId: target,
          replyWanted: false,
        });
        break;
      }
      case "host": {
        const w = workers[a.host]!;
        if (a.what === "connect") {
          if (a.fault === -1 && now >= scenario.faultsEndMs) w.heal(now);
          else w.connect(now);
        } else w.onFault(now, a.fault);
        break;
      }
      case "arrive": {
        const c = clients[a.client]!;
        arrived++;
        requestIds.push(c.requestId);
        c.arrive(now);
        break;
      }
    }
  }
  if (
    observer.violation === null &&
    (observer.openCount > 0 || observer.openTasks > 0)
  ) {
    observer.failLiveness(
      `${observer.openCount} request(s) and ${observer.openTasks} lifecycle task(s) never ended`,
    );
    failingEvent = `${now} (end of run)`;
  }
  const v = observer.violation as Violation | null;
  return {
    ok: v === null,
    violation: v,
    step: steps,
    failingEvent,
    atMs: now,
    hash: hash.hex(),
    events: steps,
    checks: observer.checks,
    trace,
    sched: observer.sched,
    lifecycle: observer.lifecycle,
  };
}
