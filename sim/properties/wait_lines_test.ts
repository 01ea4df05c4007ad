// Issue 30: wait lines under any order of events (fast-check, fixed seed, so a
// failure is reproduced by its printed path). Streaming requests, with and
// without X-ModelRelay-Progress, keep-alive on; workers come and go, answer,
// fail and break; ticks pass. Per request, what its client is sent must read
// as one well-formed answer:
//   - at most one head (startStream), and never a whole response after it;
//   - relay comment lines only before the backend's first byte;
//   - exactly one end (respond, respondError or endStream), nothing after it.
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  addWorker,
  chunk,
  complete,
  newState,
  step,
} from "../../core/_testing.ts";
import type { Effect } from "../../core/effect.ts";
import { EXTENSION_RESIDENCY } from "../../core/protocol/messages.ts";
import type { State } from "../../core/state/state.ts";

type Op =
  | { kind: "request"; model: string; progress: boolean }
  | { kind: "worker"; id: string; residency: boolean }
  | { kind: "chunk"; worker: string; nth: number }
  | { kind: "complete"; worker: string; nth: number; status: number }
  | { kind: "error"; worker: string; nth: number }
  | { kind: "disconnect"; worker: string }
  | { kind: "client"; nth: number }
  | { kind: "tick"; ms: number };

const WORKERS = ["w1", "w2"];
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant("request" as const),
    model: fc.constantFrom("a", "b"),
    progress: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant("worker" as const),
    id: fc.constantFrom(...WORKERS),
    residency: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant("chunk" as const),
    worker: fc.constantFrom(...WORKERS),
    nth: fc.nat(5),
  }),
  fc.record({
    kind: fc.constant("complete" as const),
    worker: fc.constantFrom(...WORKERS),
    nth: fc.nat(5),
    status: fc.constantFrom(200, 400, 500),
  }),
  fc.record({
    kind: fc.constant("error" as const),
    worker: fc.constantFrom(...WORKERS),
    nth: fc.nat(5),
  }),
  fc.record({
    kind: fc.constant("disconnect" as const),
    worker: fc.constantFrom(...WORKERS),
  }),
  fc.record({ kind: fc.constant("client" as const), nth: fc.nat(5) }),
  fc.record({
    kind: fc.constant("tick" as const),
    ms: fc.integer({ min: 1, max: 3_000 }),
  }),
);

/** What one request's client was sent, as the checks need it. */
type Seen = {
  heads: number;
  backendBytes: boolean;
  ended: boolean;
  problems: string[];
};

function watch(seen: Map<string, Seen>, effects: Effect[]): void {
  for (const f of effects) {
    if (!("requestId" in f) || f.kind === "requestFinished") continue;
    const s = seen.get(f.requestId);
    if (s === undefined) continue;
    const bad = (what: string) => s.problems.push(`${f.kind}: ${what}`);
    if (s.ended) bad("after the end");
    switch (f.kind) {
      case "startStream":
        if (++s.heads > 1) bad("a second head");
        break;
      case "writeChunk": {
        if (s.heads === 0) bad("a chunk before the head");
        const comment = typeof f.chunk === "string" && f.chunk.startsWith(": ");
        if (comment && s.backendBytes) bad("a wait line after a backend byte");
        if (!comment) s.backendBytes = true;
        break;
      }
      case "respond":
      case "respondError":
        if (s.heads > 0) bad("a whole response after the head");
        s.ended = true;
        break;
      case "endStream":
        if (s.heads === 0) bad("an end of a stream never started");
        s.ended = true;
        break;
    }
  }
}

/** The nth request (mod the count) still known to the core, assigned to `worker` when given. */
function pick(state: State, nth: number, worker?: string): string | null {
  const ids = [...state.requests.values()].filter((r) =>
    worker === undefined ||
    (r.status.kind !== "queued" && r.status.workerId === worker)
  ).map((r) => r.id);
  return ids.length === 0 ? null : ids[nth % ids.length]!;
}

function run(ops: Op[]): Map<string, Seen> {
  const state = newState({
    sseKeepAliveMs: 1_000,
    queueTimeoutMs: 20_000,
    requestTimeoutMs: 30_000,
    heartbeatTimeoutMs: 1e9,
  });
  const seen = new Map<string, Seen>();
  let n = 0;
  const connected = new Set<string>();
  for (const op of ops) {
    let effects: Effect[] = [];
    switch (op.kind) {
      case "request": {
        const id = `r${n++}`;
        seen.set(id, {
          heads: 0,
          backendBytes: false,
          ended: false,
          problems: [],
        });
        effects = step(state, {
          kind: "requestReceived",
          atMs: state.nowMs,
          requestId: id,
          api: "openai",
          endpointPath: "/v1/chat/completions",
          model: op.model,
          isStreaming: true,
          body: "{}",
          headers: op.progress ? { "x-modelrelay-progress": "1" } : {},
        });
        break;
      }
      case "worker":
        if (connected.has(op.id)) continue;
        connected.add(op.id);
        effects = addWorker(state, op.id, {
          models: ["a", "b"],
          maxConcurrent: 1,
          extensions: op.residency ? [EXTENSION_RESIDENCY] : [],
        });
        if (op.residency) {
          effects.push(...step(state, {
            kind: "residencyReceived",
            atMs: state.nowMs,
            workerId: op.id,
            loaded: [],
            loading: [],
            room: 1,
          }));
        }
        break;
      case "chunk": {
        const id = pick(state, op.nth, op.worker);
        if (id === null) continue;
        effects = chunk(state, op.worker, id, "data: {}\n\n");
        break;
      }
      case "complete": {
        const id = pick(state, op.nth, op.worker);
        if (id === null) continue;
        effects = complete(state, op.worker, id, { status: op.status });
        break;
      }
      case "error": {
        const id = pick(state, op.nth, op.worker);
        if (id === null) continue;
        effects = step(state, {
          kind: "workerErrorReceived",
          atMs: state.nowMs,
          workerId: op.worker,
          requestId: id,
          code: "backend_unavailable",
          message: "down",
        });
        break;
      }
      case "disconnect":
        if (!connected.delete(op.worker)) continue;
        effects = step(state, {
          kind: "workerDisconnected",
          atMs: state.nowMs,
          workerId: op.worker,
          reason: "gone",
        });
        break;
      case "client": {
        const id = pick(state, op.nth);
        if (id === null) continue;
        effects = step(state, {
          kind: "clientDisconnected",
          atMs: state.nowMs,
          requestId: id,
        });
        // The client left: nothing more reaches it, whatever the core says.
        seen.get(id)!.ended = true;
        break;
      }
      case "tick":
        effects = step(state, { kind: "tick", atMs: state.nowMs + op.ms });
        break;
    }
    watch(seen, effects);
  }
  // Time runs out: every request still open ends by its deadline.
  watch(seen, step(state, { kind: "tick", atMs: state.nowMs + 60_000 }));
  return seen;
}

Deno.test("wait lines: under any order of events each client gets one head at most, lines only before the backend's bytes, and one end", () => {
  fc.assert(
    fc.property(fc.array(opArb, { maxLength: 60 }), (ops) => {
      for (const [id, s] of run(ops)) {
        assert.deepEqual(s.problems, [], id);
        assert.ok(s.ended, `${id} never ended`);
      }
    }),
    { seed: 30, numRuns: 400 },
  );
});
