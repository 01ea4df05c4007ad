// The simulator's instances (issue 34): each is the core's host
// (core/cluster/host.ts) over ports implemented here, as
// shell/server/cluster/instance_io.ts implements them over Redis and WebSockets.
import {
  DATA_PATH_RULES,
  type DataPathRules,
  type Host,
  type HostFact,
  makeHost,
  stepHost,
} from "../../core/cluster/host.ts";
import {
  DEFAULT_INSTANCE_RULES,
  initialInstance,
  type InstanceRules,
  type LogEntry,
} from "../../core/cluster/instance.ts";
import { ownerOf } from "../../core/cluster/ownership.ts";
import {
  type ClusterRecord,
  decodeRecord,
  encodeRecord,
  initialClusterState,
  stateDigest,
} from "../../core/cluster/mod.ts";
import { chunkAsText, type Effect, piecesAsText } from "../../core/mod.ts";
import { tokensOf } from "../../core/state/usage.ts";
import { violate } from "./checks.ts";
import {
  TOKEN_TENANT,
  tokenCharged,
  tokenDispatched,
  tokenEntryRead,
  tokensOfRequest,
} from "./tokens.ts";
import {
  answerOf,
  CHUNKS,
  type ClusterMutant,
  DIGEST_EVERY,
  feed,
  type Inst,
  later,
  observe,
  type World,
} from "./shape.ts";
import {
  closeConn,
  endClient,
  instanceLeft,
  jobDone,
  tokensOfClient,
  workerCloses,
} from "./fleet.ts";
import { closeLinksFrom, sendPiece } from "./links.ts";

// ---- the instance: the core's host, over virtual ports -------------------------

export function rulesOf(mutant: ClusterMutant | null): DataPathRules {
  const real = DATA_PATH_RULES;
  switch (mutant) {
    case "directSizeUncut":
      return {
        ...real,
        routeChunk: (senders, core, owner, e) =>
          real.routeChunk(
            senders,
            {
              ...core,
              config: { ...core.config, streamCharsMax: Infinity },
            },
            owner,
            e,
          ),
      };
    case "directDeltasSkipped":
      return {
        ...real,
        routeEnd: (...a) => ({ ...real.routeEnd(...a), deltas: null }),
        linkBroke: (...a) =>
          real.linkBroke(...a).map((c) => ({ ...c, deltas: null })),
      };
    case "wholeStreamErrs":
      return { ...real, completedStream: () => null };
    case "writeBeforeCommit":
      return {
        ...real,
        pieceArrived: (rx, piece, from, nowMs) => {
          const out = real.pieceArrived(rx, piece, from, nowMs);
          const s = rx.get(piece.requestId);
          if (s !== undefined && !s.committed && s.held.length > 0) {
            for (const chunk of s.held.splice(0)) {
              out.push({ kind: "write", requestId: piece.requestId, chunk });
            }
          }
          return out;
        },
      };
    case "endIgnoresPieces":
      return { ...real, expectPieces: () => {} };
    case "dropEarlyPieces":
      return {
        ...real,
        pieceArrived: (rx, piece, from, nowMs) =>
          rx.get(piece.requestId)?.workerId === piece.workerId
            ? real.pieceArrived(rx, piece, from, nowMs)
            : [],
      };
    case "endWaitsForever":
      return {
        ...real,
        receiverDue: (rx, nowMs, idleMs) =>
          real.receiverDue(rx, nowMs, idleMs, Number.POSITIVE_INFINITY),
        peerGone: () => [],
      };
    default:
      return real;
  }
}

export function newInst(w: World, idx: number, restarts: number): Inst {
  const liveness = w.mutant === "noLiveness"
    ? { deadAfterMs: 1e12, lagMaxMs: 1e12, logGapMs: 2_000 }
    : undefined;
  const base = restarts === 0 ? `i${idx}` : `i${idx}r${restarts}`;
  const rules: InstanceRules = w.mutant === "giveUpOnHold"
    ? { ...DEFAULT_INSTANCE_RULES, lostAfterMs: 0, rejoinRetryMs: 1 }
    : DEFAULT_INSTANCE_RULES;
  const s = initialInstance(
    w.config,
    initialClusterState(w.config, liveness),
    base,
    rules,
  );
  const inst = {
    idx,
    url: `sim://${base}`,
    proc: "running",
    frozenAtMs: 0,
    thawAtMs: 0,
    restarts,
    lastAppendAtMs: 0,
    cutUntil: 0,
    broken: false,
    conns: new Set(),
    clients: new Set(),
  } as unknown as Inst;
  inst.host = makeHost(s, ports(w, inst), rulesOf(w.mutant));
  inst.host.peerUrl = inst.url;
  return inst;
}

/** Whether the engine answers this instance now. */
export function reachable(w: World, inst: Inst): boolean {
  return w.now >= inst.cutUntil && w.now >= w.log.stalledUntil;
}

export function ports(w: World, inst: Inst): Host["ports"] {
  const everyone = w.mutant === "everyoneExecutes";
  return {
    append: (record, ticket) => send(w, inst, record, ticket),
    read(gen) {
      w.queue.push(w.now + w.prng.int(1, 10), {
        k: "catchUp",
        i: inst.idx,
        gen,
      });
    },
    join() {
      w.queue.push(w.now + w.prng.int(1, 10), { k: "join", inst });
    },
    resume() {
      w.queue.push(w.now + w.prng.int(1, 10), { k: "resume", inst });
    },
    putSnapshot(snapshot, trimBeforeId, digest) {
      w.queue.push(w.now + w.prng.int(1, 20), {
        k: "snapshot",
        inst,
        epoch: w.log.epoch,
        snapshot,
        trimBeforeId,
        digest,
      });
    },
    sendPiece: (to, url, piece) => sendPiece(w, inst, to, url, piece),
    closeLinks: () => closeLinksFrom(w, inst),
    holds: {
      client: (id) => everyone || inst.clients.has(id),
      clientStarted: (id) => w.clients.get(id)?.started === true,
      worker: (id) => everyone || inst.conns.has(id),
      handshake: () => false,
      clients: () => [...inst.clients],
      workers: () => [...inst.conns],
      handshakes: () => [],
    },
    run: (effect) => run(w, inst, effect),
    arm(timer, ms) {
      later(w, inst, ms, { kind: timer === "flush" ? "flushDue" : "retryDue" });
    },
    log() {},
    fact: (f) => fact(w, inst, f),
  };
}

export function fact(w: World, inst: Inst, f: HostFact): void {
  switch (f.kind) {
    case "applied":
      for (const id of f.died) w.dead.add(id);
      if (w.tokenFirstRead) {
        for (const e of f.effects) charged(w, e);
      }
      return;
    case "rejoined":
      w.stats.rejoins++;
      return;
    case "left":
      return instanceLeft(w, inst);
    case "inputFailed":
      return violate(
        w,
        "coreAccepts",
        `${inst.host.inst.id} on ${f.input}: ${f.error}`,
      );
    case "note":
      return;
  }
}

/**
 * The first replica to apply a completion charges its tokens (the ledger
 * stands for the fleet); every completed request charges what it used
 * (streamsCounted, issue 33).
 */
export function charged(w: World, e: Effect): void {
  if (e.kind !== "requestFinished" || e.outcome !== "completed") return;
  const c = w.clients.get(e.requestId);
  if (c === undefined) return;
  if (e.tenant === TOKEN_TENANT) {
    tokenCharged(w.tokens, w.history, e.requestId, tokensOfClient(c));
  }
  // The completion tokens the core's own rules give (the worker's counts, or
  // one per content delta): the prompt side of an estimate is the usage
  // rules' to decide (core/state/usage.ts), not this check's.
  const want = c.stream && !c.asksUsage
    ? CHUNKS
    : tokensOfRequest(c.n).completion;
  const got = e.usage.completion ?? 0;
  if (got !== want || tokensOf(e.usage) < want) {
    violate(
      w,
      "streamsCounted",
      `${c.id} (${c.stream ? "stream" : "whole"}${
        c.asksUsage ? ", usage asked" : ""
      }) charged ${got} completion tokens, used ${want}`,
    );
  }
}

/** Kept by the host until the engine acknowledges it. */
export function send(
  w: World,
  inst: Inst,
  record: ClusterRecord,
  ticket: number,
): void {
  const data = encodeRecord(record);
  const at = Math.max(inst.lastAppendAtMs, w.now + w.prng.int(0, 3));
  inst.lastAppendAtMs = at;
  const epoch = w.log.epoch;
  // Acknowledged even while frozen: the process reads the reply on thaw.
  const ack = () => {
    if (inst.proc === "running" || inst.proc === "frozen") {
      stepHost(inst.host, { kind: "appendAcked", ticket, atMs: w.now });
    }
  };
  w.queue.push(at, { k: "append", data, epoch, i: inst.idx, ack });
  if (w.dieAfterAppend === inst) {
    w.dieAfterAppend = null;
    w.queue.push(at, { k: "kill", inst });
  }
  if (w.s.faults.includes("duplicate") && w.prng.chance(1, 15)) {
    // A client retry after a lost reply: the same record lands twice.
    w.queue.push(at + w.prng.int(1, 20), {
      k: "append",
      data,
      epoch,
      i: inst.idx,
      ack,
    });
  }
}

/** One entry read by one replica: the host applies it; the run checks digests. */
export function readEntry(
  w: World,
  inst: Inst,
  entry: LogEntry,
  gen: number,
): void {
  const s = inst.host.inst;
  if (w.mutant === "noDedup") {
    // Forget the last applied seq: a retried append is applied twice.
    for (const view of s.cluster.instances.values()) {
      view.seq = Math.max(0, view.seq - 1);
    }
  }
  // The mutant stamps events with each replica's own reading time.
  const read = w.mutant === "applyTimeClock"
    ? { ...entry, ms: w.now + inst.idx }
    : w.mutant === "tokensPerInstance"
    ? ownTokensOnly(inst, entry)
    : entry;
  w.tokenFirstRead = tokenEntryRead(
    w.tokens,
    w.history,
    entry.id,
    w.s.tokenLimited ? () => decodeRecord(read.data) : null,
  );
  w.applying = entry;
  w.applyingSeen.clear();
  feed(w, inst, { kind: "entryRead", generation: gen, entry: read });
  w.applying = null;
  w.tokenFirstRead = false;
  const seq = Number(entry.id.slice(entry.id.indexOf("-") + 1));
  if ((entry.ms + seq) % DIGEST_EVERY !== 0 || s.position !== entry.id) return;
  const key = `${w.log.epoch}:${entry.id}`;
  const d = stateDigest(s.cluster);
  const seen = w.digests.get(key);
  w.stats.digestChecks++;
  if (seen === undefined) w.digests.set(key, d);
  else if (seen !== d) {
    violate(w, "replicasAgree", `replica ${s.id} at ${key}: ${d} ≠ ${seen}`);
  }
}

/**
 * The tokensPerInstance mutant: this replica sees the token counts of the
 * completions of its own clients' requests only, so each instance decides the
 * token limit on the share of the traffic it holds.
 */
export function ownTokensOnly(inst: Inst, entry: LogEntry): LogEntry {
  const record = decodeRecord(entry.data);
  if (record.kind !== "events") return entry;
  const events = record.events.map((e) =>
    e.kind === "completeReceived" && !inst.clients.has(e.requestId)
      ? { ...e, tokenCounts: null }
      : e
  );
  return { ...entry, data: encodeRecord({ ...record, events }) };
}

/** An effect this instance holds the socket of (the host's ownership filter passed it). */
export function run(w: World, inst: Inst, effect: Effect): void {
  const owner = ownerOf(effect);
  if (owner.kind === "workerSocket") return toWorker(w, inst, effect);
  if (owner.kind === "client") return toClient(w, inst, effect);
}

/** Each socket effect of an entry runs on one instance only (keyed by entry and target). */
export function count(w: World, effect: Effect, target: string): void {
  if (w.applying === null) return;
  const base = `${w.log.epoch}:${w.applying.id}:${effect.kind}:${target}`;
  const nth = (w.applyingSeen.get(base) ?? 0) + 1;
  w.applyingSeen.set(base, nth);
  const key = `${base}:${nth}`;
  const n = (w.executed.get(key) ?? 0) + 1;
  w.executed.set(key, n);
  if (n > 1) violate(w, "socketEffectsOnce", `effect ${key} ran ${n} times`);
}

export function toWorker(w: World, inst: Inst, effect: Effect): void {
  if (
    effect.kind !== "sendToWorker" && effect.kind !== "closeWorker" &&
    effect.kind !== "rejectWorker"
  ) return;
  const conn = w.conns.get(effect.workerId);
  if (conn === undefined || !conn.open) return;
  count(w, effect, effect.workerId);
  if (effect.kind === "rejectWorker" && w.applying === null) {
    // The defect of issue 23: the instance forgets the handshake unanswered,
    // and the worker waits on it for good.
    if (w.mutant === "handshakeLeaks") return void inst.conns.delete(conn.id);
  }
  if (effect.kind !== "sendToWorker") return closeConn(w, conn, true);
  const m = effect.message;
  if (m.type === "request") {
    w.trace?.(
      `${w.now} ${inst.host.inst.id} sends ${m.request_id} to ${conn.id}`,
    );
    const c = w.clients.get(m.request_id);
    if (c?.tenant === "rl") {
      const set = w.dispatchedRl.get(w.history) ?? new Set();
      set.add(m.request_id);
      w.dispatchedRl.set(w.history, set);
    }
    if (c?.tenant === TOKEN_TENANT) {
      tokenDispatched(w.tokens, w.history, m.request_id);
    }
    if (c !== undefined) {
      const per = w.answers.get(c.id) ?? new Map<string, string>();
      per.set(conn.id, answerOf(c, conn));
      w.answers.set(c.id, per);
    }
    conn.jobs.add(m.request_id);
    w.queue.push(w.now + w.prng.int(5, 40), {
      k: "job",
      conn: conn.id,
      requestId: m.request_id,
      step: 0,
    });
  } else if (m.type === "cancel") {
    w.jobsCancelled.add(`${conn.id}/${m.request_id}`);
    jobDone(w, conn, m.request_id);
  } else if (m.type === "ping") {
    observe(w, w.insts[conn.inst]!, {
      kind: "pongReceived",
      atMs: w.now,
      workerId: conn.id,
      currentLoad: null,
    });
  } else if (m.type === "graceful_shutdown") {
    // The worker finishes what it holds, then closes and reconnects (a relay
    // instance stopping: ON_SERVER_SHUTDOWN=reconnect).
    conn.draining = true;
    if (conn.jobs.size === 0) workerCloses(w, conn);
  }
}

export function toClient(w: World, inst: Inst, effect: Effect): void {
  if (
    effect.kind !== "startStream" && effect.kind !== "writeChunk" &&
    effect.kind !== "endStream" && effect.kind !== "respond" &&
    effect.kind !== "respondError"
  ) return;
  const c = w.clients.get(effect.requestId);
  if (c === undefined || !c.connected || !inst.clients.has(c.id)) return;
  count(w, effect, effect.requestId);
  if (effect.kind === "startStream") c.started = true;
  else if (effect.kind === "writeChunk") {
    c.received += chunkAsText(effect.chunk);
  } else if (effect.kind === "endStream") {
    if (effect.error === null && w.applying === null) w.stats.endedHere++;
    endClient(w, c.id, 200, effect.error?.code ?? null);
  } else if (effect.kind === "respond") {
    c.received = piecesAsText(effect.bodyPieces ?? [], effect.body);
    endClient(w, c.id, effect.status, null);
  } else endClient(w, c.id, effect.error.status, effect.error.code);
}
