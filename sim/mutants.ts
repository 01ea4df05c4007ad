// Deliberately broken cores (TigerBeetle's canary): each wraps the real reducer
// and breaks one promise. A test asserts that the default sweep catches every
// one, which proves the invariants can fail (conventions §6, P5).
import { type Effect, reduce, type State } from "../core/mod.ts";
import type { ReduceFn } from "./run_scenario.ts";

export type Mutant = {
  name: string;
  /** The promise it breaks. */
  breaks: string;
  /** A fresh broken reducer per run (mutants may keep memory). */
  make: () => ReduceFn;
};

function skipRequeueCap(): ReduceFn {
  return (state, event) => {
    if (state.config.requeueCountMax < 1_000) {
      state.config = { ...state.config, requeueCountMax: 1_000 };
    }
    return reduce(state, event);
  };
}

function lateChunks(): ReduceFn {
  const streamed = new Set<string>();
  return (state, event) => {
    const out = reduce(state, event);
    for (const f of out.effects) {
      if (f.kind === "startStream") streamed.add(f.requestId);
    }
    if (
      event.kind === "chunkReceived" && streamed.has(event.requestId) &&
      !state.requests.has(event.requestId)
    ) {
      out.effects.push({
        kind: "writeChunk",
        requestId: event.requestId,
        chunk: event.chunk,
      });
    }
    return out;
  };
}

function overDispatch(): ReduceFn {
  return (state, event) => {
    const out = reduce(state, event);
    if (event.kind === "registerReceived") {
      const w = state.workers.get(event.workerId);
      if (w !== undefined) w.maxConcurrent += 1;
    }
    return out;
  };
}

function cancelQueued(): ReduceFn {
  return (state, event) => {
    const r = event.kind === "clientDisconnected"
      ? state.requests.get(event.requestId)
      : undefined;
    const extra: Effect[] = [];
    if (r !== undefined && r.status.kind === "queued") {
      const w = state.workers.keys().next();
      if (w.done !== true) {
        extra.push({
          kind: "sendToWorker",
          workerId: w.value,
          message: {
            type: "cancel",
            request_id: r.id,
            reason: "client_disconnect",
          },
        });
      }
    }
    const out = reduce(state, event);
    out.effects.unshift(...extra);
    return out;
  };
}

function noRoundRobin(): ReduceFn {
  // Ties go to the worker that arrived at the level last instead of first.
  return (state: State, event) => {
    for (const byKey of state.routes.values()) {
      for (const b of byKey.values()) {
        for (const [level, set] of b.byLevel) {
          if (set.size > 1) b.byLevel.set(level, new Set([...set].reverse()));
        }
      }
    }
    return reduce(state, event);
  };
}

function extendDeadlineOnRequeue(): ReduceFn {
  const extended = new Set<string>();
  return (state, event) => {
    const out = reduce(state, event);
    for (const r of state.requests.values()) {
      if (r.requeueCount > 0 && !extended.has(r.id)) {
        extended.add(r.id);
        r.deadlineAtMs += state.config.requestTimeoutMs;
      }
    }
    return out;
  };
}

function lateQueueTimeout(): ReduceFn {
  // Queued requests never time out: each tick pushes their queue deadline on.
  return (state, event) => {
    if (event.kind === "tick") {
      for (const r of state.requests.values()) {
        if (r.status.kind === "queued") {
          r.status.queueDeadlineAtMs = Math.max(
            r.status.queueDeadlineAtMs,
            event.atMs + 1,
          );
        }
      }
    }
    return reduce(state, event);
  };
}

export const MUTANTS: readonly Mutant[] = [
  {
    name: "skip_requeue_cap",
    breaks: "C23 at most 3 requeues",
    make: skipRequeueCap,
  },
  {
    name: "late_chunks",
    breaks: "C20 chunks after the end are dropped",
    make: lateChunks,
  },
  {
    name: "over_dispatch",
    breaks: "C8 in-flight never exceeds max_concurrent",
    make: overDispatch,
  },
  {
    name: "cancel_queued",
    breaks: "C18 no cancel for a queued request",
    make: cancelQueued,
  },
  {
    name: "no_round_robin",
    breaks: "C8 ties go round-robin",
    make: noRoundRobin,
  },
  {
    name: "extend_deadline_on_requeue",
    breaks: "C22 requeue never extends the deadline",
    make: extendDeadlineOnRequeue,
  },
  {
    name: "late_queue_timeout",
    breaks: "C12 queue timeout ends a queued request",
    make: lateQueueTimeout,
  },
];
