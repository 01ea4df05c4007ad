// The models simulator (issue 30): virtual GPU boxes whose backends hold a
// few models at once (room), load one in seconds on a request for a model they
// do not hold (unloading their least recently used idle model, as llama-swap
// and Ollama do), and report what they hold (residency-v1) — or, for today's
// routing on the same seed, report nothing (original dialect). The real core
// routes; named invariants (sim/models/invariants/) are checked after every step.
// Everything random is drawn from the run's seed.
import {
  type Config,
  type Effect,
  type Event,
  EXTENSION_RESIDENCY,
  initialState,
  makeConfig,
  reduce,
  type State,
} from "../../core/mod.ts";
import { EventQueue } from "../event_queue.ts";
import { everyRequestEnds } from "./invariants/every_request_ends.ts";
import { hotFirst } from "./invariants/hot_first.ts";
import { modelsBefore } from "./invariants/models_snapshot.ts";
import { noEvictionUnderDemand } from "./invariants/no_eviction_under_demand.ts";
import { noLoadWithoutDemand } from "./invariants/no_load_without_demand.ts";
import { Prng } from "../prng.ts";
import type { Range } from "../scenario.ts";

export type ModelsInvariant =
  | "hotFirst"
  | "noEvictionUnderDemand"
  | "noLoadWithoutDemand"
  | "everyRequestEnds";

/** new: workers report residency (hot first); today: they report nothing. */
export type Policy = "new" | "today";

export type BoxSpec = {
  name: string;
  models: string[];
  maxConcurrent: number;
  room: number;
  /** Models loaded when it starts. */
  preloaded: string[];
  /** The worker dies while its first load after this time runs, and comes back after `backAfterMs`. */
  dieMidLoadAfterMs?: number;
  backAfterMs?: number;
  /**
   * The operator drains the worker at this time (C28): it finishes what it
   * runs, the relay closes it, and it reconnects `backAfterMs` later; its
   * backend keeps what it holds meanwhile.
   */
  drainAtMs?: number;
  /**
   * Share (percent) of the requests its backend refuses before any byte, as
   * a scoped `backend_unavailable` (a real llama-server router's keep-alive
   * "socket hang up" under load): the core requeues them avoiding this worker.
   */
  refusePct?: number;
};

/** Request arrivals, expanded with the run's seed. */
export type Arrivals =
  /** One at a time, models in turn (A, B, A, B…), each after the previous one ended plus a gap. */
  | { kind: "sequential"; count: number; models: string[]; gapMs: Range }
  /** `count` at random times in [fromMs, toMs], models weighted (the first most often). */
  | {
    kind: "random";
    count: number;
    fromMs: number;
    toMs: number;
    models: string[];
  }
  /** Bursts of `size` for one model at once, `everyMs` apart, models in turn. */
  | {
    kind: "bursts";
    bursts: number;
    size: number;
    everyMs: number;
    models: string[];
  };

export type ModelsScenario = {
  name: string;
  boxes: BoxSpec[];
  arrivals: Arrivals[];
  loadMs: Range;
  serviceMs: Range;
  /** Service times of some models, when not `serviceMs`. */
  serviceMsByModel?: Record<string, Range>;
  firstByteMs: Range;
  netMs: Range;
  /** Share of clients (percent) that leave before their answer, `abortAfterMs` after arriving. */
  abortPct?: number;
  abortAfterMs?: Range;
  config?: Partial<Config>;
};

export type ModelsMutant = {
  name: string;
  breaks: string;
  caughtBy: ModelsInvariant;
  /** A fresh broken reducer per run. */
  make: () => typeof reduce;
  /** Scenario that catches it (seeds 1-5). */
  scenario: string;
};

export type ModelsResult = {
  scenario: string;
  policy: Policy;
  seed: bigint;
  violation: { name: ModelsInvariant; message: string } | null;
  requests: number;
  completed: number;
  failed: number;
  /** Clients that left before their answer ended. */
  aborted: number;
  /** Loads the backends did. */
  loads: number;
  ttfbMs: number[];
  /** The same, per model. */
  ttfbMsByModel: Record<string, number[]>;
  events: number;
};

type Item =
  | { kind: "arrive"; id: string; model: string }
  | { kind: "abort"; id: string }
  /** A frame from a box's connection `conn` (dropped if that connection died meanwhile). */
  | { kind: "core"; box: number; conn: number; event: Event }
  | { kind: "box"; box: number; conn: number; step: BoxStep }
  | { kind: "tick" }
  | { kind: "connect"; box: number }
  | { kind: "drain"; box: number }
  /** A load ends: the backend's, so it outlives the worker's connection, not the box's death. */
  | { kind: "loaded"; box: number; epoch: number; model: string };

type BoxStep =
  | { kind: "request"; id: string; model: string }
  | { kind: "cancel"; id: string }
  | { kind: "firstByte"; id: string }
  | { kind: "done"; id: string }
  | { kind: "die" };

type Job = { id: string; model: string; serving: boolean };

/** One GPU box: its backend's memory and its worker's connection. */
type Box = {
  spec: BoxSpec;
  prng: Prng;
  conn: number;
  connected: boolean;
  /** model -> loaded (true) or loading (false); Map order is least recently used first. */
  resident: Map<string, boolean>;
  jobs: Map<string, Job>;
  /** Last time a frame from this connection reaches the core (frames keep their order). */
  sendAt: number;
  recvAt: number;
  dieArmed: boolean;
  /** Bumped when the box dies: loads under way then never end. */
  epoch: number;
};

const TICK_MS = 1_000;
const HORIZON_AFTER_LAST_MS = 300_000;

function draw(prng: Prng, r: Range): number {
  return prng.int(r[0], r[1]);
}

export const MODELS_CONFIG: Partial<Config> = {
  queueLenMax: 100_000,
  tenantQueueLenMax: 100_000,
  queueTimeoutMs: 240_000,
  requestTimeoutMs: 600_000,
  modelDrainMax: 8,
  modelLoadMsAssumed: 30_000,
};

export function runModels(
  scenario: ModelsScenario,
  seed: bigint,
  policy: Policy,
  reduceFn: typeof reduce = reduce,
): ModelsResult {
  const root = Prng.fromSeed(seed);
  const arrivalsPrng = root.fork();
  const boxPrngs = scenario.boxes.map(() => root.fork());
  const config = makeConfig({ ...MODELS_CONFIG, ...scenario.config });
  const drainMax = config.modelDrainMax;
  const state: State = initialState(config, 0);
  const queue = new EventQueue<Item>();
  const result: ModelsResult = {
    scenario: scenario.name,
    policy,
    seed,
    violation: null,
    requests: 0,
    completed: 0,
    failed: 0,
    aborted: 0,
    loads: 0,
    ttfbMs: [],
    ttfbMsByModel: {},
    events: 0,
  };
  const arrivedAt = new Map<string, number>();
  const modelOf = new Map<string, string>();
  const arrived: string[] = [];
  const ends = new Map<string, number>();
  const firstByte = new Set<string>();
  /** Sequential arrivals: the next one is released when this one ends. */
  const chained = new Map<string, Item & { kind: "arrive" }>();
  const chainGap = new Map<string, Range>();
  let now = 0;
  let lastArrivalMs = 0;
  let nextId = 0;

  const boxes: Box[] = scenario.boxes.map((spec, i) => ({
    spec,
    prng: boxPrngs[i]!,
    conn: 0,
    connected: false,
    resident: new Map(spec.preloaded.map((m) => [m, true])),
    jobs: new Map(),
    sendAt: 0,
    recvAt: 0,
    dieArmed: spec.dieMidLoadAfterMs !== undefined,
    epoch: 0,
  }));
  const workerId = (b: number) => `${boxes[b]!.spec.name}#${boxes[b]!.conn}`;

  // ---- arrivals ---------------------------------------------------------------
  for (const a of scenario.arrivals) {
    switch (a.kind) {
      case "random":
        for (let i = 0; i < a.count; i++) {
          // Weighted: model k is picked with weight (n - k).
          const n = a.models.length;
          let roll = arrivalsPrng.int(0, (n * (n + 1)) / 2 - 1);
          let k = 0;
          while (roll >= n - k) {
            roll -= n - k;
            k++;
          }
          const at = arrivalsPrng.int(a.fromMs, a.toMs);
          const id = `r${++nextId}`;
          queue.push(at, { kind: "arrive", id, model: a.models[k]! });
          lastArrivalMs = Math.max(lastArrivalMs, at);
        }
        break;
      case "bursts":
        for (let b = 0; b < a.bursts; b++) {
          const model = a.models[b % a.models.length]!;
          for (let i = 0; i < a.size; i++) {
            const at = b * a.everyMs + arrivalsPrng.int(0, 200);
            queue.push(at, { kind: "arrive", id: `r${++nextId}`, model });
            lastArrivalMs = Math.max(lastArrivalMs, at);
          }
        }
        break;
      case "sequential": {
        let prev: string | null = null;
        for (let i = 0; i < a.count; i++) {
          const item = {
            kind: "arrive" as const,
            id: `r${++nextId}`,
            model: a.models[i % a.models.length]!,
          };
          if (prev === null) queue.push(100, item);
          else chained.set(prev, item);
          chainGap.set(item.id, a.gapMs);
          prev = item.id;
        }
        break;
      }
    }
  }

  // ---- the core -----------------------------------------------------------------
  function step(event: Event): void {
    if (result.violation !== null) return;
    result.events++;
    const before = modelsBefore(state);
    const { effects } = reduceFn(state, event);
    const fail = (name: ModelsInvariant, message: string | null) => {
      if (message !== null && result.violation === null) {
        result.violation = { name, message: `${now} ms: ${message}` };
      }
    };
    fail("noLoadWithoutDemand", noLoadWithoutDemand(state, effects));
    fail("hotFirst", hotFirst(state, before, effects, drainMax));
    fail(
      "noEvictionUnderDemand",
      noEvictionUnderDemand(state, before, effects, drainMax),
    );
    for (const f of effects) applyEffect(f);
  }

  /** The core's one record of a request's end (C34): counted, and the next sequential client released. */
  function ended(id: string, outcome: string, status: number): void {
    ends.set(id, (ends.get(id) ?? 0) + 1);
    if (outcome === "cancelled") result.aborted++;
    else if (outcome === "completed" && status < 400) result.completed++;
    else result.failed++;
    const next = chained.get(id);
    if (next !== undefined) {
      chained.delete(id);
      const gap = chainGap.get(next.id)!;
      queue.push(now + draw(arrivalsPrng, gap), next);
    }
  }

  function boxOf(wid: string): number {
    return boxes.findIndex((b, i) => b.connected && workerId(i) === wid);
  }

  function applyEffect(f: Effect): void {
    switch (f.kind) {
      case "sendToWorker": {
        const b = boxOf(f.workerId);
        if (b < 0) return;
        const box = boxes[b]!;
        const m = f.message;
        const at = box.recvAt = Math.max(
          box.recvAt,
          now + draw(box.prng, scenario.netMs),
        );
        if (m.type === "request") {
          queue.push(at, {
            kind: "box",
            box: b,
            conn: box.conn,
            step: { kind: "request", id: m.request_id, model: m.model },
          });
        } else if (m.type === "cancel") {
          queue.push(at, {
            kind: "box",
            box: b,
            conn: box.conn,
            step: { kind: "cancel", id: m.request_id },
          });
        } else if (m.type === "ping") {
          toCore(b, {
            kind: "pongReceived",
            atMs: 0,
            workerId: workerId(b),
            currentLoad: box.jobs.size,
          });
        } else if (m.type === "register_ack") {
          report(b);
        }
        return;
      }
      case "startStream":
      case "writeChunk":
        if (!firstByte.has(f.requestId)) {
          firstByte.add(f.requestId);
          const ms = now - arrivedAt.get(f.requestId)!;
          result.ttfbMs.push(ms);
          const model = modelOf.get(f.requestId)!;
          (result.ttfbMsByModel[model] ??= []).push(ms);
        }
        return;
      case "requestFinished":
        ended(f.requestId, f.outcome, f.status);
        return;
      case "closeWorker": {
        // The relay closed a drained worker: it comes back later, its backend
        // still holding what it held.
        const b = boxOf(f.workerId);
        if (b < 0) return;
        const box = boxes[b]!;
        box.connected = false;
        box.jobs.clear();
        queue.push(now + (box.spec.backAfterMs ?? 20_000), {
          kind: "connect",
          box: b,
        });
        return;
      }
      default:
        return;
    }
  }

  /** A frame from box `b` reaches the core after the network delay, in order. */
  function toCore(b: number, event: Event): void {
    const box = boxes[b]!;
    const at = box.sendAt = Math.max(
      box.sendAt,
      now + draw(box.prng, scenario.netMs),
    );
    queue.push(at, {
      kind: "core",
      box: b,
      conn: box.conn,
      event: { ...event, atMs: at },
    });
  }

  function report(b: number): void {
    const box = boxes[b]!;
    if (policy !== "new" || !box.connected) return;
    const loaded: string[] = [];
    const loading: string[] = [];
    for (const [m, ready] of box.resident) (ready ? loaded : loading).push(m);
    toCore(b, {
      kind: "residencyReceived",
      atMs: 0,
      workerId: workerId(b),
      loaded,
      loading,
      room: box.spec.room,
    });
  }

  // ---- the virtual backend ------------------------------------------------------
  function startLoad(b: number, model: string): void {
    const box = boxes[b]!;
    box.resident.set(model, false);
    result.loads++;
    const loadMs = draw(box.prng, scenario.loadMs);
    queue.push(now + loadMs, {
      kind: "loaded",
      box: b,
      epoch: box.epoch,
      model,
    });
    const dieAfter = box.spec.dieMidLoadAfterMs;
    if (box.dieArmed && dieAfter !== undefined && now >= dieAfter) {
      box.dieArmed = false;
      queue.push(now + Math.floor(loadMs / 2), {
        kind: "box",
        box: b,
        conn: box.conn,
        step: { kind: "die" },
      });
    }
  }

  function serve(b: number, job: Job): void {
    const box = boxes[b]!;
    const refuse = box.spec.refusePct;
    if (refuse !== undefined && box.prng.chance(refuse, 100)) {
      // Refused before any byte: the job is gone, nothing else changes here.
      box.jobs.delete(job.id);
      toCore(b, {
        kind: "workerErrorReceived",
        atMs: 0,
        workerId: workerId(b),
        requestId: job.id,
        code: "backend_unavailable",
        message: "backend unavailable: socket hang up",
      });
      return;
    }
    job.serving = true;
    const first = draw(box.prng, scenario.firstByteMs);
    const service = scenario.serviceMsByModel?.[job.model] ??
      scenario.serviceMs;
    const total = first + draw(box.prng, service);
    const item = (step: BoxStep): Item => ({
      kind: "box",
      box: b,
      conn: box.conn,
      step,
    });
    queue.push(now + first, item({ kind: "firstByte", id: job.id }));
    queue.push(now + total, item({ kind: "done", id: job.id }));
  }

  /**
   * Starts what can start, in arrival order: jobs of loaded models, loads for
   * the rest, room allowing. A job waiting for room holds back every later
   * job (a swap in line, as llama-swap and Ollama's scheduler keep it), so
   * a stream of requests for the loaded model cannot starve it.
   */
  function advance(b: number): void {
    const box = boxes[b]!;
    let waitingForRoom = false;
    for (const job of box.jobs.values()) {
      if (job.serving) continue;
      const r = box.resident.get(job.model);
      if (r === true) {
        if (!waitingForRoom) serve(b, job);
        continue;
      }
      if (r === false) continue; // loading: served when it is loaded
      if (waitingForRoom) continue;
      if (box.resident.size >= box.spec.room) {
        // Unload the least recently used model serving nothing here.
        let victim: string | undefined;
        for (const [m, ready] of box.resident) {
          if (!ready) continue;
          let busy = false;
          for (const j of box.jobs.values()) {
            if (j.model === m && j.serving) busy = true;
          }
          if (!busy) {
            victim = m;
            break;
          }
        }
        if (victim === undefined) {
          waitingForRoom = true; // waits for a model to go idle
          continue;
        }
        box.resident.delete(victim);
      }
      startLoad(b, job.model);
      report(b);
    }
  }

  /** The box's answer to `requestId` ends, with this status and no body. */
  function answered(b: number, requestId: string, statusCode: number): void {
    toCore(b, {
      kind: "completeReceived",
      atMs: 0,
      workerId: workerId(b),
      requestId,
      statusCode,
      headers: {},
      body: "",
      tokenCounts: null,
    });
  }

  function onBox(b: number, s: BoxStep): void {
    const box = boxes[b]!;
    const wid = workerId(b);
    switch (s.kind) {
      case "request": {
        if (box.resident.has(s.model)) {
          // Least recently used order follows the requests, as the core's does.
          const ready = box.resident.get(s.model)!;
          box.resident.delete(s.model);
          box.resident.set(s.model, ready);
        }
        box.jobs.set(s.id, { id: s.id, model: s.model, serving: false });
        advance(b);
        return;
      }
      case "cancel":
        if (!box.jobs.delete(s.id)) return;
        answered(b, s.id, 499);
        advance(b);
        return;
      case "firstByte":
        if (!box.jobs.has(s.id)) return;
        toCore(b, {
          kind: "chunkReceived",
          atMs: 0,
          workerId: wid,
          requestId: s.id,
          chunk: "data: {}\n\n",
        });
        return;
      case "done":
        if (!box.jobs.delete(s.id)) return;
        answered(b, s.id, 200);
        advance(b);
        report(b);
        return;
      case "die":
        box.epoch++;
        box.connected = false;
        box.jobs.clear();
        box.resident.clear();
        step({
          kind: "workerDisconnected",
          atMs: now,
          workerId: wid,
          reason: "worker died mid-load",
        });
        queue.push(now + (box.spec.backAfterMs ?? 20_000), {
          kind: "connect",
          box: b,
        });
        return;
    }
  }

  function connect(b: number): void {
    const box = boxes[b]!;
    box.conn++;
    box.connected = true;
    const wid = workerId(b);
    step({
      kind: "workerConnectAttempted",
      atMs: now,
      workerId: wid,
      provider: "local",
      clientIp: "10.0.0.1",
      secretValid: true,
    });
    step({
      kind: "registerReceived",
      atMs: now,
      workerId: wid,
      workerName: box.spec.name,
      models: box.spec.models,
      maxConcurrent: box.spec.maxConcurrent,
      protocolVersion: "2026-04-bridge-v1",
      currentLoad: 0,
      ...(policy === "new" ? { extensions: [EXTENSION_RESIDENCY] } : {}),
    });
  }

  // ---- the run --------------------------------------------------------------------
  boxes.forEach((box, b) => {
    queue.push(0, { kind: "connect", box: b });
    if (box.spec.drainAtMs !== undefined) {
      queue.push(box.spec.drainAtMs, { kind: "drain", box: b });
    }
  });
  queue.push(TICK_MS, { kind: "tick" });
  for (;;) {
    const next = queue.pop();
    if (next === null || result.violation !== null) break;
    now = next.atMs;
    const item = next.item;
    switch (item.kind) {
      case "abort":
        if (!ends.has(item.id)) {
          step({ kind: "clientDisconnected", atMs: now, requestId: item.id });
        }
        break;
      case "arrive":
        arrivedAt.set(item.id, now);
        modelOf.set(item.id, item.model);
        arrived.push(item.id);
        result.requests++;
        lastArrivalMs = Math.max(lastArrivalMs, now);
        if (
          scenario.abortPct !== undefined &&
          arrivalsPrng.chance(scenario.abortPct, 100)
        ) {
          queue.push(now + draw(arrivalsPrng, scenario.abortAfterMs!), {
            kind: "abort",
            id: item.id,
          });
        }
        step({
          kind: "requestReceived",
          atMs: now,
          requestId: item.id,
          api: "openai",
          endpointPath: "/v1/chat/completions",
          model: item.model,
          isStreaming: true,
          body: `{"model":"${item.model}","stream":true}`,
          headers: {},
        });
        break;
      case "core":
        if (boxes[item.box]!.conn === item.conn && boxes[item.box]!.connected) {
          step(item.event);
        }
        break;
      case "box":
        if (boxes[item.box]!.conn === item.conn && boxes[item.box]!.connected) {
          onBox(item.box, item.step);
        }
        break;
      case "connect":
        connect(item.box);
        break;
      case "loaded": {
        const box = boxes[item.box]!;
        if (
          box.epoch !== item.epoch || box.resident.get(item.model) !== false
        ) break;
        box.resident.set(item.model, true);
        advance(item.box);
        report(item.box);
        break;
      }
      case "drain":
        if (boxes[item.box]!.connected) {
          step({
            kind: "workerDrainRequested",
            atMs: now,
            workerId: workerId(item.box),
            reason: "operator",
          });
        }
        break;
      case "tick": {
        step({ kind: "tick", atMs: now });
        const done = arrived.length === nextId && ends.size >= nextId;
        if (!done && now < lastArrivalMs + HORIZON_AFTER_LAST_MS) {
          queue.push(now + TICK_MS, { kind: "tick" });
        }
        break;
      }
    }
  }
  if (result.violation === null) {
    const message = everyRequestEnds(arrived, ends) ??
      (chained.size > 0
        ? `${chained.size} sequential request(s) never released`
        : null);
    if (message !== null) {
      result.violation = { name: "everyRequestEnds", message };
    }
  }
  return result;
}

/** Percentile (nearest rank) of `xs`, 0 when empty. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return 0;
  const sorted = [...xs].sort((a, b) => a - b);
  const rank = Math.min(
    sorted.length - 1,
    Math.ceil((p / 100) * sorted.length) - 1,
  );
  return sorted[Math.max(0, rank)]!;
}
