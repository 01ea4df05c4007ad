// The simulator's workers and clients (issues 16, 23, 33): what they send the
// instances they attach to, and what they receive.
import { EXTENSION_CHUNK_BYTES } from "../../core/mod.ts";
import type { TokenCounts } from "../../core/protocol/messages.ts";
import { violate } from "./checks.ts";
import { tokensOfRequest } from "./tokens.ts";
import {
  type Action,
  chunkOf,
  CHUNKS,
  type Client,
  type Conn,
  type Inst,
  observe,
  UTF8,
  type World,
} from "./shape.ts";
import { completed, linksDie } from "./links.ts";

// ---- observed events ---------------------------------------------------------------

export function endClient(
  w: World,
  id: string,
  status: number,
  errorCode: string | null,
): void {
  const c = w.clients.get(id);
  if (c === undefined || !c.connected) return;
  const error = errorCode !== null || status >= 400;
  c.ends++;
  w.trace?.(`${w.now} ${id} ends ${status}${error ? ` (${errorCode})` : ""}`);
  if (c.ends > 1) violate(w, "endsOnce", `${id} ended ${c.ends} times`);
  c.status = status;
  c.error = error;
  c.errorCode = errorCode;
  gone(w, c);
  w.insts[c.inst]?.clients.delete(id);
  w.stats.ended++;
  if (c.stream && !error) w.stats.streamsWhole++;
  if (errorCode === "stream_too_large") w.stats.sizeCuts++;
}

/** endLocal as the mutant leaveAtOnce does it: every client and socket ended. */
export function dropLocal(w: World, inst: Inst, status: number): void {
  for (const r of [...inst.clients]) endClient(w, r, status, "shutting_down");
  inst.clients.clear();
  for (const id of [...inst.conns]) {
    const c = w.conns.get(id);
    if (c !== undefined) closeConn(w, c, true);
  }
}

export function instanceLeft(w: World, inst: Inst): void {
  inst.proc = "exited";
  w.stats.leaves++;
  linksDie(w, inst);
  for (const l of w.leaves) if (l.inst === inst.idx) l.done = true;
  w.trace?.(`${w.now} ${inst.host.inst.id} left the cluster`);
  // A rolling restart: the same slot comes back as a new process.
  w.queue.push(w.now + w.prng.int(1_000, 3_000), { k: "restart", i: inst.idx });
}

// ---- workers and clients -------------------------------------------------------

export function closeConn(w: World, conn: Conn, reconnect: boolean): void {
  if (!conn.open) return;
  conn.open = false;
  w.insts[conn.inst]?.conns.delete(conn.id);
  if (reconnect) {
    w.queue.push(w.now + w.prng.int(300, 1500), {
      k: "connect",
      w: conn.worker,
    });
  }
}

/** The worker closes its socket: its instance hears the close. */
export function workerCloses(w: World, conn: Conn): void {
  const inst = w.insts[conn.inst]!;
  if (conn.open && inst.proc === "running") {
    observe(w, inst, {
      kind: "workerDisconnected",
      atMs: w.now,
      workerId: conn.id,
      reason: "worker closed the connection",
    });
  }
  closeConn(w, conn, true);
}

export function jobDone(w: World, conn: Conn, requestId: string): void {
  conn.jobs.delete(requestId);
  if (conn.draining && conn.jobs.size === 0 && conn.open) {
    w.queue.push(w.now + 1, {
      k: "job",
      conn: conn.id,
      requestId: "",
      step: -1,
    });
  }
}

export function connect(w: World, worker: number): void {
  // The balancer sees only processes that accept connections.
  const candidates = w.insts.filter((x) => x.proc === "running");
  if (candidates.length === 0) {
    w.queue.push(w.now + 500, { k: "connect", w: worker });
    return;
  }
  const inst = w.prng.pick(candidates);
  w.trace?.(`${w.now} worker ${worker} connects to ${inst.host.inst.id}`);
  const conn: Conn = {
    id: `w${worker}c${++w.connSeq}`,
    worker,
    inst: inst.idx,
    open: true,
    draining: false,
    jobs: new Set(),
  };
  w.conns.set(conn.id, conn);
  inst.conns.add(conn.id);
  observe(w, inst, {
    kind: "workerConnectAttempted",
    atMs: w.now,
    workerId: conn.id,
    provider: "local",
    clientIp: "10.0.0.1",
    secretValid: true,
  });
  if (!conn.open) return; // refused at once
  observe(w, inst, {
    kind: "registerReceived",
    atMs: w.now,
    workerId: conn.id,
    workerName: `w${worker}`,
    models: ["m"],
    maxConcurrent: 2,
    protocolVersion: "2026-04-bridge-v1",
    currentLoad: 0,
    // Odd workers stream bytes (chunk-bytes-v1, issue 18): the log's record
    // codec and the peer links carry them.
    ...(worker % 2 === 1 ? { extensions: [EXTENSION_CHUNK_BYTES] } : {}),
  });
}

export function job(w: World, a: Extract<Action, { k: "job" }>): void {
  const conn = w.conns.get(a.conn);
  if (conn === undefined || !conn.open) return;
  if (a.step < 0) {
    if (conn.draining && conn.jobs.size === 0) workerCloses(w, conn);
    return;
  }
  if (w.jobsCancelled.has(`${a.conn}/${a.requestId}`)) return;
  const inst = w.insts[conn.inst]!;
  // A frozen instance's socket buffers the worker's frames until it thaws;
  // a dead or disconnected one closes the connection (closeConn) instead.
  if (inst.proc === "frozen") {
    w.queue.push(w.now + 100, a);
    return;
  }
  if (inst.proc !== "running") return;
  const c = w.clients.get(a.requestId);
  const stream = c?.stream ?? false;
  if (a.step < CHUNKS && stream && c !== undefined) {
    const text = chunkOf(c, conn, a.step);
    observe(w, inst, {
      kind: "chunkReceived",
      atMs: w.now,
      workerId: conn.id,
      requestId: a.requestId,
      chunk: conn.worker % 2 === 1 ? UTF8.encode(text) : text,
    });
  }
  if (a.step < CHUNKS) {
    w.queue.push(w.now + w.prng.int(5, 60), { ...a, step: a.step + 1 });
    return;
  }
  if (c !== undefined && c.inst === conn.inst) completed(w, c, conn);
  observe(w, inst, {
    kind: "completeReceived",
    atMs: w.now,
    workerId: conn.id,
    requestId: a.requestId,
    statusCode: 200,
    headers: {},
    body: stream ? "" : `body-${a.requestId}`,
    // A stream whose client did not ask for usage carries none: the core
    // counts its content deltas (issue 26), wherever its chunks went.
    tokenCounts: c !== undefined && c.stream && !c.asksUsage
      ? null
      : tokenCountsOf(a.requestId),
  });
  jobDone(w, conn, a.requestId);
}

/** What the virtual backend used for request `r<n>` (fixed per request). */
export function tokenCountsOf(requestId: string): TokenCounts {
  const t = tokensOfRequest(Number(requestId.slice(1)));
  return {
    prompt_tokens: t.prompt,
    completion_tokens: t.completion,
    total_tokens: t.prompt + t.completion,
  };
}

/** The tokens a completed request of this client charges: its counts, or its deltas. */
export function tokensOfClient(c: Client): number {
  if (c.stream && !c.asksUsage) return CHUNKS;
  const t = tokensOfRequest(c.n);
  return t.prompt + t.completion;
}

export function arrive(w: World, n: number): void {
  const candidates = w.insts.filter((x) => x.proc === "running");
  if (candidates.length === 0) return;
  const inst = w.prng.pick(candidates);
  const id = `r${n}`;
  w.trace?.(`${w.now} ${id} arrives at ${inst.host.inst.id}`);
  const stream = w.prng.chance(1, 2);
  const c: Client = {
    id,
    n,
    inst: inst.idx,
    tenant: w.prng.chance(1, 3) ? "rl" : w.prng.pick(["a", "b"]),
    stream,
    asksUsage: stream && n % 2 === 0,
    big: stream && n % 9 === 4,
    arrivedAtMs: w.now,
    endedAtMs: null,
    connected: true,
    started: false,
    received: "",
    ends: 0,
    status: null,
    error: false,
    errorCode: null,
  };
  w.clients.set(id, c);
  inst.clients.add(id);
  if (w.prng.chance(1, 8)) {
    w.queue.push(w.now + w.prng.int(10, 400), { k: "abort", requestId: id });
  }
  observe(w, inst, {
    kind: "requestReceived",
    atMs: w.now,
    requestId: id,
    api: "openai",
    endpointPath: "/v1/chat/completions",
    model: "m",
    isStreaming: c.stream,
    body: JSON.stringify({
      model: "m",
      n,
      ...(c.stream ? { stream: true } : {}),
      ...(c.asksUsage ? { stream_options: { include_usage: true } } : {}),
    }),
    headers: {},
    tenant: c.tenant,
  });
}

/** The client stops waiting: answered, aborted, or its instance died. */
export function gone(w: World, c: Client): void {
  c.connected = false;
  c.endedAtMs = w.now;
}

export function abort(w: World, requestId: string): void {
  const c = w.clients.get(requestId);
  const inst = c === undefined ? undefined : w.insts[c.inst];
  if (c === undefined || !c.connected || inst === undefined) return;
  gone(w, c);
  inst.clients.delete(c.id);
  observe(w, inst, {
    kind: "clientDisconnected",
    atMs: w.now,
    requestId: c.id,
  });
}
