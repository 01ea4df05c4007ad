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
  piecesBefore,
  type ReceiverAction,
  receiverDue,
  type Receivers,
  requestEnded,
  resumeAfterHold,
  routeChunk,
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
  const rng = Prng.fromSeed(s.seed);
  const q = new EventQueue<Item>();
  const log: { record: ClusterRecord; atMs: number }[] = [];
  const clients = new Map<string, Client>();
  /** Per request: the answers of its dispatches (worker#n -> text). */
  const answers = new Map<string, Map<string, string>>();
  const cancelled = new Set<string>();
  const violations: DataPathRun["violations"] = [];
  const has = (f: DataPathFault) => s.faults.includes(f);
  let now = 0;
  let logUp = true;
  let lastLand = 0;
  let crashes = 0;
  let crashAtCommitFrom = has("crashAtCommit") ? rng.int(2_000, 10_000) : -1;
  let crashAfterEndFrom = has("crashAfterEnd") ? rng.int(2_000, 10_000) : -1;
  const linkLast = new Map<string, number>();
  const insts: Inst[] = Array.from({ length: INSTANCES }, (_, idx) => ({
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
  }));

  function append(inst: Inst, record: ClusterRecord): void {
    if (!inst.alive) return;
    if (!logUp || inst.heldSince !== null) {
      inst.heldSince ??= now;
      inst.unacked.push(record);
      return;
    }
    lastLand = Math.max(lastLand, now + rng.int(1, 4));
    q.push(lastLand, { k: "land", record });
  }

  function events(inst: Inst, evs: Event[], direct?: Record<string, number>) {
    append(inst, {
      kind: "events",
      instance: inst.id,
      seq: ++inst.seq,
      appliedMs: null,
      events: evs,
      ...(direct === undefined ? {} : { direct }),
    });
  }

  function toClient(actions: ReceiverAction[]): void {
    for (const a of actions) {
      const c = clients.get(a.kind === "write" ? a.requestId : reqOf(a.effect));
      if (c === undefined || c.gone || c.end !== null) continue;
      if (a.kind === "write") {
        c.text += String(a.chunk);
        continue;
      }
      const e = a.effect;
      if (e.kind === "writeChunk") c.text += String(e.chunk);
      else if (e.kind === "respond") {
        c.text += e.body;
        c.end = "ok";
      } else if (e.kind === "endStream") {
        c.end = e.error === null ? "ok" : "error";
      } else if (e.kind === "respondError") c.end = "error";
    }
  }

  function onEffect(inst: Inst, e: Effect): void {
    if (e.kind === "sendToWorker") {
      const m = e.message;
      const worker = Number(e.workerId.slice(1));
      if (m.type === "request") {
        if (clients.get(m.request_id)?.inst === inst.idx) {
          toClient(dispatched(inst.rx, m.request_id, e.workerId, now));
        }
        if (worker === inst.idx) startAnswer(worker, m.request_id);
      } else if (m.type === "cancel" && worker === inst.idx) {
        cancelled.add(`${worker}/${m.request_id}`);
      }
      return;
    }
    if (e.kind === "requestFinished") return requestEnded(inst.rx, e.requestId);
    if ("requestId" in e && clients.get(e.requestId)?.inst === inst.idx) {
      toClient(logEffect(inst.rx, e, now));
    }
  }

  function startAnswer(worker: number, requestId: string): void {
    const per = answers.get(requestId) ?? new Map<string, string>();
    answers.set(requestId, per);
    const n = per.size;
    const pieces = rng.int(2, 10);
    let text = "";
    let t = now;
    for (let i = 0; i < pieces; i++) {
      text += `w${worker}#${n}:${i};`;
      t += rng.int(5, 60);
      q.push(t, { k: "chunk", worker, requestId, n, i });
    }
    const streaming = clients.get(requestId)?.streaming ?? true;
    per.set(`w${worker}#${n}`, text + (streaming ? "" : "END"));
    q.push(t + rng.int(1, 20), { k: "done", worker, requestId, n });
  }

  function crash(inst: Inst): void {
    inst.alive = false;
    crashes++;
    for (const c of clients.values()) if (c.inst === inst.idx) c.gone = true;
    // Its links close: the others learn at once (a socket's end).
    for (const other of insts) {
      if (!other.alive) continue;
      toClient(rules.peerGone(other.rx, inst.id));
      for (const c of linkBroke(other.senders, inst.id)) {
        append(other, cut(other, c.requestId, c.workerId));
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

  function fromWorker(worker: number, ev: Event): void {
    const inst = insts[worker]!;
    if (!inst.alive) return;
    if (ev.kind !== "chunkReceived") {
      const ended = piecesBefore(inst.senders, ev);
      events(
        inst,
        [ev],
        ended === null ? undefined : { [ended.requestId]: ended.pieces },
      );
      if (
        ended !== null && crashAfterEndFrom >= 0 && now >= crashAfterEndFrom &&
        inst.cs.requestOwner.get(ended.requestId) !== inst.id
      ) {
        crashAfterEndFrom = -1;
        crash(inst);
      }
      return;
    }
    const route = routeChunk(
      inst.senders,
      inst.cs.core,
      inst.cs.requestOwner.get(ev.requestId),
      ev,
    );
    if (route.kind === "log") return events(inst, [ev]);
    if (route.kind !== "direct") return;
    const to = Number(route.to.slice(1));
    const dieBeforeCommit = route.commit !== null && crashAtCommitFrom >= 0 &&
      now >= crashAtCommitFrom && to !== inst.idx;
    if (route.commit !== null && !dieBeforeCommit) events(inst, [route.commit]);
    if (to === inst.idx) {
      toClient(rules.pieceArrived(inst.rx, route.piece, inst.id, now));
    } else {
      const key = `${inst.idx}>${to}`;
      const slow = has("slowLinks") && rng.chance(1, 3) ? 40 : 3;
      const at = Math.max(linkLast.get(key) ?? 0, now + rng.int(1, slow));
      linkLast.set(key, at);
      q.push(at, {
        k: "piece",
        to,
        from: inst.idx,
        piece: route.piece,
        lostIfSenderDies: rng.chance(1, 2),
      });
    }
    if (dieBeforeCommit) {
      crashAtCommitFrom = -1;
      crash(inst);
    }
  }

  function apply(inst: Inst, index: number): void {
    const { record, atMs } = log[index]!;
    if (record.kind === "events" && record.direct !== undefined) {
      for (const [id, n] of Object.entries(record.direct)) {
        rules.expectPieces(inst.rx, id, n);
      }
    }
    const applied = applyRecord(inst.cs, structuredClone(record), atMs);
    for (const e of applied.effects) onEffect(inst, e);
    if (applied.died.includes(inst.id) && inst.alive) crash(inst);
  }

  function resume(inst: Inst): void {
    if (!inst.alive || inst.heldSince === null) return;
    const d = rules.resumeAfterHold({
      heldSinceMs: inst.heldSince,
      nowMs: now,
      lostAfterMs: HOLD_LIMIT_MS,
      epochNow: "e",
      epochMine: "e",
      snapshotMs: null,
      appliedMs: null,
      snapshotEveryMs: 5_000,
    });
    inst.heldSince = null;
    const held = inst.unacked.splice(0);
    if (d.kind === "resume") {
      for (const r of held) append(inst, r);
      return;
    }
    // Given up: what it held ends with an error; it stays a member (the sim
    // does not model its rejoin under a new id).
    for (const [id, c] of clients) {
      if (c.inst !== inst.idx || c.end !== null || c.gone) continue;
      c.end = "error";
      events(inst, [{ kind: "clientDisconnected", atMs: now, requestId: id }]);
    }
    inst.rx.clear();
  }

  function step(item: Item): void {
    switch (item.k) {
      case "tick":
        for (const inst of insts) {
          if (!inst.alive) continue;
          const due = rules.receiverDue(inst.rx, now, config.requestTimeoutMs);
          toClient(due.actions);
          if (logUp && inst.heldSince === null) {
            events(inst, [{ kind: "tick", atMs: now }]);
          }
        }
        if (now + TICK_MS <= END_MS) q.push(now + TICK_MS, { k: "tick" });
        return;
      case "arrive": {
        const inst = insts[item.inst]!;
        if (!inst.alive || !logUp || inst.heldSince !== null) return; // 503
        clients.set(item.requestId, {
          inst: item.inst,
          streaming: item.streaming,
          text: "",
          end: null,
          gone: false,
        });
        return events(inst, [{
          kind: "requestReceived",
          atMs: now,
          requestId: item.requestId,
          api: "openai",
          endpointPath: "/v1/chat/completions",
          model: "m",
          isStreaming: item.streaming,
          body: "{}",
          headers: {},
        }]);
      }
      case "land": {
        log.push({ record: item.record, atMs: now });
        const index = log.length - 1;
        for (const inst of insts) {
          if (!inst.alive) continue;
          const late = has("slowReader") && inst.idx === INSTANCES - 1
            ? rng.int(20, 150)
            : rng.int(0, 3);
          inst.applyAt = Math.max(inst.applyAt, now + late);
          q.push(inst.applyAt, { k: "apply", inst: inst.idx, index });
        }
        return;
      }
      case "apply": {
        const inst = insts[item.inst]!;
        if (inst.alive) apply(inst, item.index);
        return;
      }
      case "piece": {
        const inst = insts[item.to]!;
        // A piece on a link whose sender died may be lost with the link.
        if (!inst.alive) return;
        if (!insts[item.from]!.alive && item.lostIfSenderDies) return;
        toClient(
          rules.pieceArrived(inst.rx, item.piece, insts[item.from]!.id, now),
        );
        return;
      }
      case "chunk":
        if (cancelled.has(`${item.worker}/${item.requestId}`)) return;
        return fromWorker(item.worker, {
          kind: "chunkReceived",
          atMs: now,
          workerId: `w${item.worker}`,
          requestId: item.requestId,
          chunk: `w${item.worker}#${item.n}:${item.i};`,
        });
      case "done":
        if (cancelled.has(`${item.worker}/${item.requestId}`)) return;
        return fromWorker(item.worker, {
          kind: "completeReceived",
          atMs: now,
          workerId: `w${item.worker}`,
          requestId: item.requestId,
          statusCode: 200,
          headers: {},
          body: clients.get(item.requestId)?.streaming === false ? "END" : "",
          tokenCounts: null,
        });
      case "logDown":
        logUp = false;
        return;
      case "logUp":
        logUp = true;
        for (const inst of insts) resume(inst);
        return;
    }
  }

  // Workers register on their instances; requests arrive over 15 s.
  for (let w = 0; w < WORKERS; w++) {
    events(insts[w]!, [{
      kind: "workerConnectAttempted",
      atMs: 0,
      workerId: `w${w}`,
      provider: "local",
      clientIp: "10.0.0.1",
      secretValid: true,
    }, {
      kind: "registerReceived",
      atMs: 0,
      workerId: `w${w}`,
      workerName: `w${w}`,
      models: ["m"],
      maxConcurrent: 4,
      protocolVersion: "2026-04-bridge-v1",
      currentLoad: 0,
    }]);
  }
  q.push(TICK_MS, { k: "tick" });
  for (let r = 0; r < s.requests; r++) {
    q.push(rng.int(1_000, 15_000), {
      k: "arrive",
      requestId: `r${r}`,
      inst: rng.int(0, INSTANCES - 1),
      streaming: rng.chance(3, 4),
    });
  }
  if (has("logOutage")) {
    const from = rng.int(3_000, 12_000);
    q.push(from, { k: "logDown" });
    q.push(from + rng.int(1_000, 6_000), { k: "logUp" });
  }
  for (;;) {
    const next = q.pop();
    if (next === null || next.atMs > END_MS) break;
    now = next.atMs;
    step(next.item);
  }
  check(s, clients, answers, crashes, violations);
  let completed = 0;
  for (const c of clients.values()) if (c.end === "ok") completed++;
  return {
    violations,
    stats: { admitted: clients.size, completed, crashes, entries: log.length },
  };
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
