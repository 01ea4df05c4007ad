// The cluster data path simulator (issue 23): three virtual instances apply one
// virtual log to their replicas (core/cluster applyRecord) and move answer
// pieces with the real data path rules (core/cluster/data_path.ts): the
// worker's instance logs a stream's commit and sends its pieces direct, the
// client's instance holds them until the commit is applied and holds the
// log's end until its pieces arrived. Seeded faults: an instance dies just
// after sending a stream's first piece (before its commit is logged), or just
// after logging an end whose pieces are still on the link; links are slower
// than the log; one instance reads the log late (pieces reach it before the
// dispatch they answer); the log goes away for seconds with streams in flight (the
// instances hold, then resume). It stands beside sim/cluster_world.ts (the
// runtime's life cycle) and drives only core code, so it outlives changes to
// that runtime.
import {
  applyRecord,
  type ClusterRecord,
  type ClusterState,
  type DirectChunk,
  dispatched,
  expectPieces,
  initialClusterState,
  linkBroke,
  logEffect,
  peerGone,
  pieceArrived,
  type ReceiverAction,
  receiverDue,
  type Receivers,
  requestEnded,
  resumeAfterHold,
  routeChunk,
  routeEnd,
  type Senders,
} from "../core/cluster/mod.ts";
import { type Effect, type Event, makeConfig } from "../core/mod.ts";
import { EventQueue } from "./event_queue.ts";
import { Prng } from "./prng.ts";

export type DataPathFault =
  | "crashAtCommit"
  | "crashAfterEnd"
  | "slowLinks"
  | "slowReader"
  | "logOutage";
export const DATA_PATH_FAULTS: readonly DataPathFault[] = [
  "crashAtCommit",
  "crashAfterEnd",
  "slowLinks",
  "slowReader",
  "logOutage",
];

export type DataPathInvariant =
  /** What a client received is (a prefix of) one dispatch's answer: never two spliced. */
  | "answerFromOneDispatch"
  /** A normal end carries the whole answer. */
  | "endedWhole"
  /** With no instance dying, a log outage shorter than the hold limit ends no stream. */
  | "streamsOutliveLogOutage"
  /** With no instance dying (and no log outage), no answer ends with an error. */
  | "noErrorWithoutFailure"
  /** Every admitted request whose client's instance lives ends. */
  | "everyRequestEnds";

/** The rules a run uses: the real ones, or a mutant's (sim/mutants.ts). */
export type DataPathRules = {
  pieceArrived: typeof pieceArrived;
  expectPieces: typeof expectPieces;
  peerGone: typeof peerGone;
  receiverDue: typeof receiverDue;
  resumeAfterHold: typeof resumeAfterHold;
};

export const REAL_RULES: DataPathRules = {
  pieceArrived,
  expectPieces,
  peerGone,
  receiverDue,
  resumeAfterHold,
};

export type DataPathScenario = {
  seed: bigint;
  requests: number;
  faults: DataPathFault[];
};

export type DataPathRun = {
  violations: { invariant: DataPathInvariant; detail: string }[];
  stats: {
    admitted: number;
    completed: number;
    crashes: number;
    entries: number;
  };
};

const config = makeConfig({});
const UTF8 = new TextDecoder();
const TICK_MS = 250;
const END_MS = 60_000;
const HOLD_LIMIT_MS = 15_000;
const INSTANCES = 3;
/** Worker w<i> sits on instance i (instance 2 holds none: its streams always cross). */
const WORKERS = 2;

type Client = {
  inst: number;
  streaming: boolean;
  text: string;
  end: "ok" | "error" | null;
  gone: boolean;
};

type Inst = {
  idx: number;
  id: string;
  alive: boolean;
  cs: ClusterState;
  seq: number;
  applied: number;
  applyAt: number;
  senders: Senders;
  rx: Receivers;
  unacked: ClusterRecord[];
  heldSince: number | null;
};

type Item =
  | { k: "tick" }
  | { k: "arrive"; requestId: string; inst: number; streaming: boolean }
  | { k: "land"; record: ClusterRecord }
  | { k: "apply"; inst: number; index: number }
  /** `lostIfSenderDies`: whether the link loses it when its sender dies first (seeded). */
  | {
    k: "piece";
    to: number;
    from: number;
    piece: DirectChunk;
    lostIfSenderDies: boolean;
  }
  | { k: "chunk"; worker: number; requestId: string; n: number; i: number }
  | { k: "done"; worker: number; requestId: string; n: number }
  | { k: "logDown" }
  | { k: "logUp" };

export function runDataPath(
  s: DataPathScenario,
  rules: DataPathRules = REAL_RULES,
): DataPathRun {
  const w = newWorld(s, rules);
  // Workers register on their instances; requests arrive over 15 s.
  for (let k = 0; k < WORKERS; k++) {
    events(w, w.insts[k]!, [{
      kind: "workerConnectAttempted",
      atMs: 0,
      workerId: `w${k}`,
      provider: "local",
      clientIp: "10.0.0.1",
      secretValid: true,
    }, {
      kind: "registerReceived",
      atMs: 0,
      workerId: `w${k}`,
      workerName: `w${k}`,
      models: ["m"],
      maxConcurrent: 4,
      protocolVersion: "2026-04-bridge-v1",
      currentLoad: 0,
    }]);
  }
  w.q.push(TICK_MS, { k: "tick" });
  for (let r = 0; r < w.s.requests; r++) {
    w.q.push(w.rng.int(1_000, 15_000), {
      k: "arrive",
      requestId: `r${r}`,
      inst: w.rng.int(0, INSTANCES - 1),
      streaming: w.rng.chance(3, 4),
    });
  }
  if (w.has("logOutage")) {
    const from = w.rng.int(3_000, 12_000);
    w.q.push(from, { k: "logDown" });
    w.q.push(from + w.rng.int(1_000, 6_000), { k: "logUp" });
  }
  for (;;) {
    const next = w.q.pop();
    if (next === null || next.atMs > END_MS) break;
    w.now = next.atMs;
    step(w, next.item);
  }
  check(w.s, w.clients, w.answers, w.crashes, w.violations);
  let completed = 0;
  for (const c of w.clients.values()) if (c.end === "ok") completed++;
  return {
    violations: w.violations,
    stats: {
      admitted: w.clients.size,
      completed,
      crashes: w.crashes,
      entries: w.log.length,
    },
  };
}

/** One run's whole state: the virtual log, instances, clients and clock. */
type World = {
  s: DataPathScenario;
  rules: DataPathRules;
  rng: Prng;
  q: EventQueue<Item>;
  log: { record: ClusterRecord; atMs: number }[];
  clients: Map<string, Client>;
  /** Per request: the answers of its dispatches (worker#n -> text). */
  answers: Map<string, Map<string, string>>;
  cancelled: Set<string>;
  violations: DataPathRun["violations"];
  has: (f: DataPathFault) => boolean;
  now: number;
  logUp: boolean;
  lastLand: number;
  crashes: number;
  crashAtCommitFrom: number;
  crashAfterEndFrom: number;
  linkLast: Map<string, number>;
  insts: Inst[];
};

function newWorld(s: DataPathScenario, rules: DataPathRules): World {
  const rng = Prng.fromSeed(s.seed);
  const has = (f: DataPathFault) => s.faults.includes(f);
  return {
    s,
    rules,
    rng,
    q: new EventQueue<Item>(),
    log: [],
    clients: new Map(),
    answers: new Map(),
    cancelled: new Set(),
    violations: [],
    has,
    now: 0,
    logUp: true,
    lastLand: 0,
    crashes: 0,
    crashAtCommitFrom: has("crashAtCommit") ? rng.int(2_000, 10_000) : -1,
    crashAfterEndFrom: has("crashAfterEnd") ? rng.int(2_000, 10_000) : -1,
    linkLast: new Map(),
    insts: Array.from({ length: INSTANCES }, (_, idx) => ({
      idx,
      id: `I${idx}`,
      alive: true,
      cs: initialClusterState(config),
      seq: 0,
      applied: 0,
      applyAt: 0,
      senders: new Map(),
      rx: new Map(),
      unacked: [],
      heldSince: null,
    })),
  };
}

function append(w: World, inst: Inst, record: ClusterRecord): void {
  if (!inst.alive) return;
  if (!w.logUp || inst.heldSince !== null) {
    inst.heldSince ??= w.now;
    inst.unacked.push(record);
    return;
  }
  w.lastLand = Math.max(w.lastLand, w.now + w.rng.int(1, 4));
  w.q.push(w.lastLand, { k: "land", record });
}

function events(
  w: World,
  inst: Inst,
  evs: Event[],
  direct?: Record<string, number>,
) {
  append(w, inst, {
    kind: "events",
    instance: inst.id,
    seq: ++inst.seq,
    appliedMs: null,
    events: evs,
    ...(direct === undefined ? {} : { direct }),
  });
}

function toClient(w: World, actions: ReceiverAction[]): void {
  for (const a of actions) {
    const c = w.clients.get(a.kind === "write" ? a.requestId : reqOf(a.effect));
    if (c === undefined || c.gone || c.end !== null) continue;
    if (a.kind === "write") {
      c.text += String(a.chunk);
      continue;
    }
    const e = a.effect;
    if (e.kind === "writeChunk") c.text += String(e.chunk);
    else if (e.kind === "respond") {
      c.text += (e.bodyPieces ?? []).map((b) => UTF8.decode(b)).join("") +
        e.body;
      c.end = "ok";
    } else if (e.kind === "endStream") {
      c.end = e.error === null ? "ok" : "error";
    } else if (e.kind === "respondError") c.end = "error";
  }
}

function onEffect(w: World, inst: Inst, e: Effect): void {
  if (e.kind === "sendToWorker") {
    const m = e.message;
    const worker = Number(e.workerId.slice(1));
    if (m.type === "request") {
      if (w.clients.get(m.request_id)?.inst === inst.idx) {
        toClient(w, dispatched(inst.rx, m.request_id, e.workerId, w.now));
      }
      if (worker === inst.idx) startAnswer(w, worker, m.request_id);
    } else if (m.type === "cancel" && worker === inst.idx) {
      w.cancelled.add(`${worker}/${m.request_id}`);
    }
    return;
  }
  if (e.kind === "requestFinished") return requestEnded(inst.rx, e.requestId);
  if ("requestId" in e && w.clients.get(e.requestId)?.inst === inst.idx) {
    toClient(w, logEffect(inst.rx, e, w.now));
  }
}

function startAnswer(w: World, worker: number, requestId: string): void {
  const per = w.answers.get(requestId) ?? new Map<string, string>();
  w.answers.set(requestId, per);
  const n = per.size;
  const pieces = w.rng.int(2, 10);
  let text = "";
  let t = w.now;
  for (let i = 0; i < pieces; i++) {
    text += `w${worker}#${n}:${i};`;
    t += w.rng.int(5, 60);
    w.q.push(t, { k: "chunk", worker, requestId, n, i });
  }
  const streaming = w.clients.get(requestId)?.streaming ?? true;
  per.set(`w${worker}#${n}`, text + (streaming ? "" : "END"));
  w.q.push(t + w.rng.int(1, 20), { k: "done", worker, requestId, n });
}

function crash(w: World, inst: Inst): void {
  inst.alive = false;
  w.crashes++;
  for (const c of w.clients.values()) if (c.inst === inst.idx) c.gone = true;
  // Its links close: the others learn at once (a socket's end).
  for (const other of w.insts) {
    if (!other.alive) continue;
    toClient(w, w.rules.peerGone(other.rx, inst.id));
    for (const c of linkBroke(other.senders, inst.id)) {
      append(w, other, cut(other, c.requestId, c.workerId));
    }
  }
}

function cut(inst: Inst, requestId: string, workerId: string): ClusterRecord {
  return {
    kind: "cut",
    instance: inst.id,
    seq: ++inst.seq,
    appliedMs: null,
    requestId,
    workerId,
    reason: "link_lost",
  };
}

/** A piece leaves `inst` for instance `to`: a call when it is the same one, else the link. */
function sendPiece(w: World, inst: Inst, to: number, piece: DirectChunk): void {
  if (to === inst.idx) {
    return toClient(w, w.rules.pieceArrived(inst.rx, piece, inst.id, w.now));
  }
  const key = `${inst.idx}>${to}`;
  const slow = w.has("slowLinks") && w.rng.chance(1, 3) ? 40 : 3;
  const at = Math.max(w.linkLast.get(key) ?? 0, w.now + w.rng.int(1, slow));
  w.linkLast.set(key, at);
  w.q.push(at, {
    k: "piece",
    to,
    from: inst.idx,
    piece,
    lostIfSenderDies: w.rng.chance(1, 2),
  });
}

/** A completion or error from a worker: its body goes direct, the rest to the log. */
function workerEnded(w: World, inst: Inst, ev: Event): void {
  const rid = ev.kind === "completeReceived" ? ev.requestId : null;
  const owner = rid === null ? undefined : inst.cs.requestOwner.get(rid);
  const end = routeEnd(inst.senders, inst.cs.core, owner, ev);
  for (const piece of end.last?.pieces ?? []) {
    sendPiece(w, inst, Number(end.last!.to.slice(1)), piece);
  }
  events(
    w,
    inst,
    [end.event],
    end.pieces === null || rid === null ? undefined : { [rid]: end.pieces },
  );
  if (
    end.pieces !== null && w.crashAfterEndFrom >= 0 &&
    w.now >= w.crashAfterEndFrom && owner !== inst.id
  ) {
    w.crashAfterEndFrom = -1;
    crash(w, inst);
  }
}

function fromWorker(w: World, worker: number, ev: Event): void {
  const inst = w.insts[worker]!;
  if (!inst.alive) return;
  if (ev.kind !== "chunkReceived") return workerEnded(w, inst, ev);
  const route = routeChunk(
    inst.senders,
    inst.cs.core,
    inst.cs.requestOwner.get(ev.requestId),
    ev,
  );
  if (route.kind === "log") return events(w, inst, [ev]);
  if (route.kind !== "direct") return;
  const to = Number(route.to.slice(1));
  const dieBeforeCommit = route.commit !== null && w.crashAtCommitFrom >= 0 &&
    w.now >= w.crashAtCommitFrom && to !== inst.idx;
  if (route.commit !== null && !dieBeforeCommit) {
    events(w, inst, [route.commit]);
  }
  sendPiece(w, inst, to, route.piece);
  if (dieBeforeCommit) {
    w.crashAtCommitFrom = -1;
    crash(w, inst);
  }
}

function apply(w: World, inst: Inst, index: number): void {
  const { record, atMs } = w.log[index]!;
  if (record.kind === "events" && record.direct !== undefined) {
    for (const [id, n] of Object.entries(record.direct)) {
      w.rules.expectPieces(inst.rx, id, n);
    }
  }
  const applied = applyRecord(inst.cs, structuredClone(record), atMs);
  for (const e of applied.effects) onEffect(w, inst, e);
  if (applied.died.includes(inst.id) && inst.alive) crash(w, inst);
}

function resume(w: World, inst: Inst): void {
  if (!inst.alive || inst.heldSince === null) return;
  const d = w.rules.resumeAfterHold({
    heldSinceMs: inst.heldSince,
    nowMs: w.now,
    lostAfterMs: HOLD_LIMIT_MS,
    epochNow: "e",
    epochMine: "e",
    lastEntryKept: true,
  });
  inst.heldSince = null;
  const held = inst.unacked.splice(0);
  if (d.kind === "resume") {
    for (const r of held) append(w, inst, r);
    return;
  }
  // Given up: what it held ends with an error; it stays a member (the sim
  // does not model its rejoin under a new id).
  for (const [id, c] of w.clients) {
    if (c.inst !== inst.idx || c.end !== null || c.gone) continue;
    c.end = "error";
    events(w, inst, [{
      kind: "clientDisconnected",
      atMs: w.now,
      requestId: id,
    }]);
  }
  inst.rx.clear();
}

/** Every 250 ms: each live instance's receiver timers, and its tick in the log. */
function tick(w: World): void {
  for (const inst of w.insts) {
    if (!inst.alive) continue;
    const due = w.rules.receiverDue(inst.rx, w.now, config.requestTimeoutMs);
    toClient(w, due.actions);
    if (w.logUp && inst.heldSince === null) {
      events(w, inst, [{ kind: "tick", atMs: w.now }]);
    }
  }
  if (w.now + TICK_MS <= END_MS) w.q.push(w.now + TICK_MS, { k: "tick" });
}

/** A client calls an instance; refused (503) while it cannot reach the log. */
function arrive(w: World, item: Extract<Item, { k: "arrive" }>): void {
  const inst = w.insts[item.inst]!;
  if (!inst.alive || !w.logUp || inst.heldSince !== null) return;
  w.clients.set(item.requestId, {
    inst: item.inst,
    streaming: item.streaming,
    text: "",
    end: null,
    gone: false,
  });
  events(w, inst, [{
    kind: "requestReceived",
    atMs: w.now,
    requestId: item.requestId,
    api: "openai",
    endpointPath: "/v1/chat/completions",
    model: "m",
    isStreaming: item.streaming,
    body: "{}",
    headers: {},
  }]);
}

function step(w: World, item: Item): void {
  switch (item.k) {
    case "tick":
      return tick(w);
    case "arrive":
      return arrive(w, item);
    case "land": {
      w.log.push({ record: item.record, atMs: w.now });
      const index = w.log.length - 1;
      for (const inst of w.insts) {
        if (!inst.alive) continue;
        const late = w.has("slowReader") && inst.idx === INSTANCES - 1
          ? w.rng.int(20, 150)
          : w.rng.int(0, 3);
        inst.applyAt = Math.max(inst.applyAt, w.now + late);
        w.q.push(inst.applyAt, { k: "apply", inst: inst.idx, index });
      }
      return;
    }
    case "apply": {
      const inst = w.insts[item.inst]!;
      if (inst.alive) apply(w, inst, item.index);
      return;
    }
    case "piece": {
      const inst = w.insts[item.to]!;
      // A piece on a link whose sender died may be lost with the link.
      if (!inst.alive) return;
      if (!w.insts[item.from]!.alive && item.lostIfSenderDies) return;
      toClient(
        w,
        w.rules.pieceArrived(
          inst.rx,
          item.piece,
          w.insts[item.from]!.id,
          w.now,
        ),
      );
      return;
    }
    case "chunk":
      if (w.cancelled.has(`${item.worker}/${item.requestId}`)) return;
      return fromWorker(w, item.worker, {
        kind: "chunkReceived",
        atMs: w.now,
        workerId: `w${item.worker}`,
        requestId: item.requestId,
        chunk: `w${item.worker}#${item.n}:${item.i};`,
      });
    case "done":
      if (w.cancelled.has(`${item.worker}/${item.requestId}`)) return;
      return fromWorker(w, item.worker, {
        kind: "completeReceived",
        atMs: w.now,
        workerId: `w${item.worker}`,
        requestId: item.requestId,
        statusCode: 200,
        headers: {},
        body: w.clients.get(item.requestId)?.streaming === false ? "END" : "",
        tokenCounts: null,
      });
    case "logDown":
      w.logUp = false;
      return;
    case "logUp":
      w.logUp = true;
      for (const inst of w.insts) resume(w, inst);
      return;
  }
}

function reqOf(e: Effect): string {
  return "requestId" in e ? String(e.requestId) : "";
}

function check(
  s: DataPathScenario,
  clients: Map<string, Client>,
  answers: Map<string, Map<string, string>>,
  crashes: number,
  violations: DataPathRun["violations"],
): void {
  for (const [id, c] of clients) {
    if (c.gone) continue;
    const whole = [...(answers.get(id)?.values() ?? [])];
    if (c.text !== "" && !whole.some((a) => a.startsWith(c.text))) {
      violations.push({
        invariant: "answerFromOneDispatch",
        detail: `${id} received ${JSON.stringify(c.text)}`,
      });
    }
    if (c.end === "ok" && !whole.includes(c.text)) {
      violations.push({
        invariant: "endedWhole",
        detail: `${id} ended normally with ${JSON.stringify(c.text)}`,
      });
    }
    if (c.end === null) {
      violations.push({ invariant: "everyRequestEnds", detail: `${id} hangs` });
    }
    if (crashes === 0 && c.end === "error") {
      violations.push({
        invariant: s.faults.includes("logOutage")
          ? "streamsOutliveLogOutage"
          : "noErrorWithoutFailure",
        detail: `${id} ended with an error though no instance died`,
      });
    }
  }
}
