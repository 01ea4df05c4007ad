import assert from "node:assert/strict";
import { makeConfig } from "../config.ts";
import type { Effect } from "../effect.ts";
import type { Event } from "../events/event.ts";
import {
  completeEvent,
  connectEvent,
  register,
  requestReceived,
} from "../_testing.ts";
import {
  completedStream,
  dispatched,
  expectPieces,
  linkBroke,
  logEffect,
  peerGone,
  pieceArrived,
  piecesBefore,
  type ReceiverAction,
  receiverDue,
  type Receivers,
  routeChunk,
  routeEnd,
  type Senders,
} from "./data_path.ts";
import { applyRecord, initialClusterState } from "./replica.ts";
import type { ClusterRecord } from "./record.ts";

const config = makeConfig({ streamCharsMax: 20, requestTimeoutMs: 1_000 });

/** A replica where instance A holds the client of r1 and B holds worker w1, r1 dispatched to w1. */
function replica(stream = true) {
  const cs = initialClusterState(config);
  let seq = 0;
  const apply = (instance: string, atMs: number, events: Event[]) => {
    const record: ClusterRecord = {
      kind: "events",
      instance,
      seq: ++seq,
      appliedMs: null,
      events,
    };
    return applyRecord(cs, record, atMs).effects;
  };
  apply("B", 1000, [connectEvent("w1"), register("w1")]);
  apply("A", 1010, [requestReceived("r1", { stream })]);
  return { cs, apply };
}

const chunk = (text: string, workerId = "w1"): Extract<
  Event,
  { kind: "chunkReceived" }
> => ({
  kind: "chunkReceived",
  atMs: 0,
  workerId,
  requestId: "r1",
  chunk: text,
});

const writes = (actions: ReceiverAction[]) =>
  actions.map((a) =>
    a.kind === "write" ? String(a.chunk) : `run:${a.effect.kind}`
  );

Deno.test("data path: a stream's first chunk logs the commit (an empty chunk) and goes direct; later chunks only go direct", () => {
  const { cs } = replica();
  const senders: Senders = new Map();
  const first = routeChunk(senders, cs.core, "A", chunk("ab"));
  assert.equal(first.kind, "direct");
  if (first.kind !== "direct") return;
  assert.equal(first.to, "A");
  assert.equal(first.commit?.chunk, "", "no chunk byte goes to the log");
  assert.deepEqual(first.piece, {
    requestId: "r1",
    workerId: "w1",
    seq: 0,
    chunk: "ab",
  });
  const second = routeChunk(senders, cs.core, "A", chunk("cd"));
  assert.equal(second.kind === "direct" && second.commit, null);
  assert.equal(second.kind === "direct" && second.piece.seq, 1);
});

Deno.test("data path: a non-streaming body's pieces go direct with no commit entry", () => {
  const { cs } = replica(false);
  const r = routeChunk(new Map(), cs.core, "A", chunk('{"a":'));
  assert.equal(r.kind === "direct" && r.commit, null);
});

Deno.test("data path: chunks the replica does not route to this worker are the core's to judge (logged)", () => {
  const { cs } = replica();
  assert.equal(
    routeChunk(new Map(), cs.core, "A", chunk("x", "w9")).kind,
    "log",
  );
  assert.equal(
    routeChunk(new Map(), cs.core, undefined, chunk("x")).kind,
    "log",
    "no known client instance",
  );
  assert.equal(
    routeChunk(new Map(), cs.core, "A", {
      ...chunk(""),
      chunk: new Uint8Array([1]),
    }).kind,
    "log",
    "bytes without chunk-bytes-v1: the core's protocol error",
  );
});

Deno.test("data path: an answer over its limit is cut once, and nothing after the cut is sent", () => {
  const { cs } = replica();
  const senders: Senders = new Map();
  assert.equal(
    routeChunk(senders, cs.core, "A", chunk("x".repeat(15))).kind,
    "direct",
  );
  const cut = routeChunk(senders, cs.core, "A", chunk("y".repeat(6)));
  assert.deepEqual(cut, {
    kind: "cut",
    requestId: "r1",
    workerId: "w1",
    reason: "too_large",
  });
  assert.equal(routeChunk(senders, cs.core, "A", chunk("z")).kind, "drop");
});

Deno.test("data path: the completion carries how many pieces went direct; the sender forgets the answer", () => {
  const { cs } = replica();
  const senders: Senders = new Map();
  routeChunk(senders, cs.core, "A", chunk("a"));
  routeChunk(senders, cs.core, "A", chunk("b"));
  const done: Event = completeEvent("w1", "r1");
  assert.deepEqual(piecesBefore(senders, done), {
    requestId: "r1",
    pieces: 2,
    deltas: 0,
  });
  assert.equal(senders.size, 0);
});

/** A content delta, as short as the test's stream limit (20) allows. */
const delta = (text: string) => chunk(`{"content":"${text}"}`);

Deno.test("data path: content deltas are counted where the chunks are routed, and logged with the end (issue 33)", () => {
  const { cs } = replica();
  const senders: Senders = new Map();
  routeChunk(senders, cs.core, "A", delta("a"));
  const end = routeEnd(senders, cs.core, "A", completeEvent("w1", "r1"));
  assert.equal(end.deltas, 1);
  // A stream ends with a marked last piece: its client's instance knows the
  // answer is whole even if the log's end never reaches it (issue 33 item 4).
  assert.equal(end.pieces, 2);
  assert.deepEqual(end.last?.pieces, [{
    requestId: "r1",
    workerId: "w1",
    seq: 1,
    chunk: "",
    end: { tokenCounts: null, deltas: 1 },
  }]);
});

Deno.test("data path: the receiver knows a stream is whole once its end marker arrived after the commit", () => {
  const { cs } = replica();
  const rx: Receivers = new Map();
  const request = cs.core.requests.get("r1")!;
  dispatched(rx, "r1", "w1", 0, request);
  pieceArrived(rx, piece(0, "a"), "B", 1);
  logEffect(rx, start, 2);
  assert.equal(completedStream(rx, "r1"), null);
  const marker = {
    ...piece(1, ""),
    end: { tokenCounts: null, deltas: 1 },
  };
  assert.deepEqual(pieceArrived(rx, marker, "B", 3), [], "writes nothing");
  assert.deepEqual(completedStream(rx, "r1"), {
    request,
    end: { tokenCounts: null, deltas: 1 },
  });
});

Deno.test("data path: a broken link cuts every answer being sent over it", () => {
  const { cs } = replica();
  const senders: Senders = new Map();
  routeChunk(senders, cs.core, "A", chunk("a"));
  assert.deepEqual(linkBroke(senders, "C"), []);
  assert.deepEqual(linkBroke(senders, "A"), [{
    requestId: "r1",
    workerId: "w1",
    deltas: 0,
  }]);
  assert.equal(routeChunk(senders, cs.core, "A", chunk("b")).kind, "drop");
});

const start: Effect = { kind: "startStream", requestId: "r1" };
const end: Effect = { kind: "endStream", requestId: "r1", error: null };
const piece = (seq: number, text: string, workerId = "w1") => ({
  requestId: "r1",
  workerId,
  seq,
  chunk: text,
});

Deno.test("data path: no byte reaches the client before the commit is applied; held bytes follow the stream's start", () => {
  const rx: Receivers = new Map();
  dispatched(rx, "r1", "w1", 0);
  assert.deepEqual(pieceArrived(rx, piece(0, "a"), "B", 1), []);
  assert.deepEqual(pieceArrived(rx, piece(1, "b"), "B", 2), []);
  assert.deepEqual(writes(logEffect(rx, start, 3)), [
    "run:startStream",
    "a",
    "b",
  ]);
  assert.deepEqual(writes(pieceArrived(rx, piece(2, "c"), "B", 4)), ["c"]);
});

Deno.test("data path: a requeue (a new dispatch) drops the bytes held for the old one; late pieces of the old worker are ignored", () => {
  const rx: Receivers = new Map();
  dispatched(rx, "r1", "w1", 0);
  pieceArrived(rx, piece(0, "old"), "B", 1);
  dispatched(rx, "r1", "w2", 2);
  assert.deepEqual(pieceArrived(rx, piece(1, "late"), "B", 3), []);
  pieceArrived(rx, piece(0, "new", "w2"), "C", 4);
  assert.deepEqual(writes(logEffect(rx, start, 5)), ["run:startStream", "new"]);
});

Deno.test("data path: the log's end waits for every piece sent before it, then ends the stream after them", () => {
  const rx: Receivers = new Map();
  dispatched(rx, "r1", "w1", 0);
  logEffect(rx, start, 1);
  pieceArrived(rx, piece(0, "a"), "B", 2);
  expectPieces(rx, "r1", 3);
  const tailBody: Effect = { kind: "writeChunk", requestId: "r1", chunk: "z" };
  assert.deepEqual(logEffect(rx, tailBody, 3), []);
  assert.deepEqual(logEffect(rx, end, 3), []);
  assert.deepEqual(writes(pieceArrived(rx, piece(1, "b"), "B", 4)), ["b"]);
  assert.deepEqual(
    writes(pieceArrived(rx, piece(2, "c"), "B", 5)),
    ["c", "run:writeChunk", "run:endStream"],
  );
  assert.equal(rx.size, 0);
});

Deno.test("data path: a non-streaming answer's pieces come before the completion's body", () => {
  const rx: Receivers = new Map();
  dispatched(rx, "r1", "w1", 0);
  pieceArrived(rx, piece(0, '{"a":'), "B", 1);
  expectPieces(rx, "r1", 1);
  const out = logEffect(rx, {
    kind: "respond",
    requestId: "r1",
    status: 200,
    headers: {},
    body: "1}",
  }, 2);
  assert.equal(out.length, 1);
  const a = out[0]!;
  assert.ok(a.kind === "run" && a.effect.kind === "respond");
  // As bytes, before the completion's body (issue 24's bodyPieces).
  const text = new TextDecoder();
  assert.equal(
    (a.effect.bodyPieces ?? []).map((b) => text.decode(b)).join("") +
      a.effect.body,
    '{"a":1}',
  );
});

Deno.test("data path: an end whose pieces never come ends with an error after the wait, or at once when their link closes", () => {
  for (const how of ["wait", "link"] as const) {
    const rx: Receivers = new Map();
    dispatched(rx, "r1", "w1", 0);
    logEffect(rx, start, 1);
    pieceArrived(rx, piece(0, "a"), "B", 2);
    expectPieces(rx, "r1", 2);
    logEffect(rx, end, 10);
    const out = how === "wait"
      ? receiverDue(rx, 10 + 4_999, 300_000).actions.length === 0
        ? receiverDue(rx, 10 + 5_000, 300_000).actions
        : []
      : peerGone(rx, "B");
    assert.equal(out.length, 1, how);
    const a = out[0]!;
    assert.ok(a.kind === "run" && a.effect.kind === "endStream");
    assert.equal(a.effect.error?.code, "cluster_link_lost");
  }
});

Deno.test("data path: the client's instance keeps the stream idle limit and reports it once", () => {
  const rx: Receivers = new Map();
  dispatched(rx, "r1", "w1", 0);
  logEffect(rx, start, 100);
  pieceArrived(rx, piece(0, "a"), "B", 200);
  assert.deepEqual(receiverDue(rx, 1_199, 1_000).idle, []);
  assert.deepEqual(receiverDue(rx, 1_200, 1_000).idle, [
    { requestId: "r1", workerId: "w1" },
  ]);
  assert.deepEqual(receiverDue(rx, 5_000, 1_000).idle, []);
});

Deno.test("data path: replicas apply a cut as the single server ends an answer; the core's own idle check stays quiet on streams it cannot see", () => {
  const { cs, apply } = replica();
  apply("B", 1020, [chunk("")]);
  assert.equal(cs.core.requests.get("r1")?.status.kind, "streaming");
  // Far past the idle limit: ticks alone never cut it (the client's instance does).
  const later = 1020 + config.requestTimeoutMs + 1;
  const ticked = apply("B", later, [{ kind: "tick", atMs: 0 }]);
  assert.ok(!ticked.some((e) => e.kind === "endStream"));
  const effects = applyRecord(cs, {
    kind: "cut",
    instance: "A",
    seq: 99,
    appliedMs: null,
    requestId: "r1",
    workerId: "w1",
    reason: "idle",
  }, later + 1).effects;
  const ended = effects.find((e) => e.kind === "endStream");
  assert.ok(ended?.kind === "endStream");
  assert.equal(ended.error?.code, "request_timeout");
  assert.ok(
    effects.some((e) =>
      e.kind === "sendToWorker" && e.message.type === "cancel"
    ),
  );
  assert.equal(cs.core.requests.size, 0);
});

Deno.test("data path: instances advertise their peer address through the log", () => {
  const { cs } = replica();
  applyRecord(cs, {
    kind: "events",
    instance: "A",
    seq: 50,
    appliedMs: null,
    events: [],
    peer: "http://10.0.0.5:8080",
  }, 1100);
  assert.equal(cs.instances.get("A")?.peerUrl, "http://10.0.0.5:8080");
});

Deno.test("data path: a gap in the pieces (lost with a broken link) ends the answer with an error, never short", () => {
  const rx: Receivers = new Map();
  dispatched(rx, "r1", "w1", 0);
  logEffect(rx, start, 1);
  pieceArrived(rx, piece(0, "a"), "B", 2);
  const out = pieceArrived(rx, piece(2, "c"), "B", 3);
  assert.equal(out.length, 1);
  const a = out[0]!;
  assert.ok(a.kind === "run" && a.effect.kind === "endStream");
  assert.equal(a.effect.error?.code, "cluster_link_lost");
  assert.deepEqual(pieceArrived(rx, piece(3, "d"), "B", 4), []);
});

Deno.test("data path: pieces that arrive before this instance applied their dispatch (the worker's instance read the log first) are taken when it does", () => {
  const rx: Receivers = new Map();
  assert.deepEqual(pieceArrived(rx, piece(0, "a"), "B", 1), []);
  assert.deepEqual(pieceArrived(rx, piece(1, "b"), "B", 2), []);
  assert.deepEqual(dispatched(rx, "r1", "w1", 3), []);
  assert.deepEqual(writes(logEffect(rx, start, 4)), [
    "run:startStream",
    "a",
    "b",
  ]);
  // A requeue's pieces may also come before the requeue is applied here.
  const rx2: Receivers = new Map();
  dispatched(rx2, "r1", "w1", 0);
  pieceArrived(rx2, piece(0, "new", "w2"), "C", 1);
  dispatched(rx2, "r1", "w2", 2);
  assert.deepEqual(writes(logEffect(rx2, start, 3)), [
    "run:startStream",
    "new",
  ]);
});

Deno.test("data path: pieces of a dispatch never applied here are forgotten after the end wait", () => {
  const rx: Receivers = new Map();
  pieceArrived(rx, piece(0, "stale"), "B", 0);
  receiverDue(rx, 4_999, 300_000);
  assert.equal(rx.size, 1);
  receiverDue(rx, 5_000, 300_000);
  assert.equal(rx.size, 0);
});

const completion = (body: string, statusCode = 200): Event =>
  completeEvent("w1", "r1", { body, status: statusCode });

Deno.test("data path: a completion's body goes direct as the answer's last piece; the log gets the completion without it", () => {
  const { cs } = replica(false);
  const senders: Senders = new Map();
  routeChunk(senders, cs.core, "A", chunk('{"a":'));
  const end = routeEnd(senders, cs.core, "A", completion("1}"));
  assert.equal(end.cut, false);
  assert.equal(end.pieces, 2);
  assert.deepEqual(end.last, {
    to: "A",
    pieces: [{ requestId: "r1", workerId: "w1", seq: 1, chunk: "1}" }],
  });
  assert.equal(end.event.kind === "completeReceived" && end.event.body, "");
  assert.equal(senders.size, 0);
  // Without pieces before it, the body alone goes direct.
  const alone = routeEnd(new Map(), cs.core, "A", completion("{}"));
  assert.equal(alone.pieces, 1);
});

Deno.test("data path: a failing status after a stream began keeps its body in the log (the core drops it, never as stream data); a body over the limit cuts the answer", () => {
  const { cs } = replica();
  const senders: Senders = new Map();
  routeChunk(senders, cs.core, "A", chunk("data: x\n\n"));
  const failed = routeEnd(senders, cs.core, "A", completion("oops", 500));
  assert.equal(failed.last, null);
  assert.equal(failed.pieces, 1);
  assert.equal(
    failed.event.kind === "completeReceived" && failed.event.body,
    "oops",
  );
  const big = new Map() as Senders;
  routeChunk(big, cs.core, "A", chunk("x".repeat(15)));
  const over = routeEnd(big, cs.core, "A", completion("y".repeat(6)));
  assert.equal(over.cut, true);
  assert.equal(over.last, null);
});

Deno.test("data path: a whole answer's bytes (body-bytes-v1, base64 in the completion) go direct as bytes after its text", () => {
  const { cs } = replica(false);
  const done = completion("");
  if (done.kind === "completeReceived") done.bodyBase64 = "AP8K";
  const end = routeEnd(new Map(), cs.core, "A", done);
  assert.equal(end.pieces, 1);
  assert.deepEqual([...(end.last!.pieces[0]!.chunk as Uint8Array)], [
    0,
    255,
    10,
  ]);
  assert.ok(end.event.kind === "completeReceived");
  assert.equal(end.event.bodyBase64, undefined, "no answer byte in the log");
});

Deno.test("data path: the deltas logged with an end count for the request only while it is with that end's worker (issue 33)", () => {
  const { cs } = replica();
  const end = (workerId: string): ClusterRecord => ({
    kind: "events",
    instance: "B",
    seq: workerId === "w1" ? 90 : 91,
    appliedMs: null,
    events: [{
      kind: "workerErrorReceived",
      atMs: 0,
      workerId,
      requestId: "r1",
      code: "x",
      message: "x",
    }],
    deltas: { r1: 5 },
  });
  const before = cs.core.requests.get("r1")!;
  assert.equal(before.deltas, 0);
  // An end of a dispatch the log no longer has (another worker): not counted.
  applyRecord(cs, end("w9"), 1020);
  assert.equal(cs.core.requests.get("r1")?.deltas, 0);
});

Deno.test("issue 33: a piece is taken only from the instance holding its worker: one from another link, early or late, is refused and logged", () => {
  const { cs } = replica();
  const rx: Receivers = new Map();
  const owner = cs.workerOwner.get("w1")!;
  assert.equal(owner, "B");
  // A piece from C claiming w1's dispatch, before the dispatch is applied here.
  assert.deepEqual(pieceArrived(rx, piece(0, "forged"), "C", 0), []);
  dispatched(rx, "r1", "w1", 1, cs.core.requests.get("r1")!, owner);
  const late = pieceArrived(rx, piece(0, "forged again"), "C", 2);
  assert.deepEqual(late.map((a) => a.kind === "run" && a.effect.kind), [
    "log",
  ]);
  logEffect(rx, start, 3);
  assert.deepEqual(pieceArrived(rx, piece(0, "real"), "B", 4), [
    { kind: "write", requestId: "r1", chunk: "real" },
  ]);
});
