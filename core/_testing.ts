// Shared helpers for the core's unit tests: event builders and effect filters.
// Private to core/ tests (leading underscore); nothing here is exported by mod.ts.
import { queuedIds } from "./state/queue.ts";
import type { Config } from "./config.ts";
import { makeConfig } from "./config.ts";
import type { Effect, EffectKind } from "./effect.ts";
import type { Event, Headers } from "./events/event.ts";
import {
  EXTENSION_RESIDENCY,
  type ServerMessage,
} from "./protocol/messages.ts";
import { reduce } from "./reduce.ts";
import { initialState, type State, type Worker } from "./state/state.ts";
import type { LifecyclePart, LifecycleTaskView } from "./vocabulary.ts";

export function newState(overrides: Partial<Config> = {}): State {
  return initialState(makeConfig(overrides));
}

/** Reduces one event and returns only its effects (the state is updated in place). */
export function step(state: State, event: Event): Effect[] {
  const reduced = reduce(state, event);
  if (reduced.state !== state) throw new Error("reduce returned a new state");
  return reduced.effects;
}

export type WorkerOpts = {
  atMs?: number;
  name?: string;
  models?: string[];
  maxConcurrent?: number;
  protocolVersion?: string | null;
  currentLoad?: number;
  provider?: string;
  clientIp?: string;
  /** workerConnectAttempted's secret check (absent: it passed). */
  secretValid?: boolean;
  /** Listed in register (absent: no field, as the original worker registers). */
  extensions?: string[];
  /** register's endpoint_prefixes (issue 25); absent: no field. */
  endpointPrefixes?: string[];
};

/** The event of a worker's socket admitted (auth ok): `connect` without a state. */
export function connectEvent(
  workerId: string,
  opts: WorkerOpts = {},
): Extract<Event, { kind: "workerConnectAttempted" }> {
  return {
    kind: "workerConnectAttempted",
    atMs: opts.atMs ?? 0,
    workerId,
    provider: opts.provider ?? "local",
    clientIp: opts.clientIp ?? "10.0.0.1",
    secretValid: opts.secretValid ?? true,
  };
}

/** A worker's socket admitted (auth ok), not registered yet. */
export function connect(
  state: State,
  workerId: string,
  opts: WorkerOpts = {},
): Effect[] {
  return step(
    state,
    connectEvent(workerId, { ...opts, atMs: opts.atMs ?? state.nowMs }),
  );
}

/** Two workers, w1 and w2, listing models a and b, both reporting residency. */
export function residencyBoxes(
  overrides: Partial<Config> = {},
  maxConcurrent = 2,
): State {
  const s = newState(overrides);
  for (const id of ["w1", "w2"]) {
    addWorker(s, id, {
      models: ["a", "b"],
      maxConcurrent,
      extensions: [EXTENSION_RESIDENCY],
    });
  }
  return s;
}

/** A worker's residency report (issue 26): what it holds, loads, and its room. */
export function reportResidency(
  state: State,
  workerId: string,
  loaded: string[],
  room: number | null = 1,
  loading: string[] = [],
): Effect[] {
  return step(state, {
    kind: "residencyReceived",
    atMs: state.nowMs,
    workerId,
    loaded,
    loading,
    room,
  });
}

/** Connects (auth ok) and registers a worker; returns the effects of both events. */
export function addWorker(
  state: State,
  workerId: string,
  opts: WorkerOpts = {},
): Effect[] {
  const atMs = opts.atMs ?? state.nowMs;
  const first = connect(state, workerId, { ...opts, atMs });
  const second = step(state, register(workerId, { ...opts, atMs }));
  return [...first, ...second];
}

export function register(
  workerId: string,
  opts: WorkerOpts = {},
): Extract<Event, { kind: "registerReceived" }> {
  return {
    kind: "registerReceived",
    atMs: opts.atMs ?? 0,
    workerId,
    workerName: opts.name ?? workerId,
    models: opts.models ?? ["m"],
    maxConcurrent: opts.maxConcurrent ?? 4,
    protocolVersion: opts.protocolVersion === undefined
      ? "2026-04-bridge-v1"
      : opts.protocolVersion,
    currentLoad: opts.currentLoad ?? 0,
    ...(opts.extensions === undefined ? {} : { extensions: opts.extensions }),
    ...(opts.endpointPrefixes === undefined
      ? {}
      : { endpointPrefixes: opts.endpointPrefixes }),
  };
}

export type RequestOpts = {
  atMs?: number;
  model?: string;
  stream?: boolean;
  body?: string;
  headers?: Headers;
  endpointPath?: string;
};

/** A client request's event at `opts.atMs` (0 when absent): `requestEvent` without a state. */
export function requestReceived(
  requestId: string,
  opts: RequestOpts = {},
): Extract<Event, { kind: "requestReceived" }> {
  return {
    kind: "requestReceived",
    atMs: opts.atMs ?? 0,
    requestId,
    api: "openai",
    endpointPath: opts.endpointPath ?? "/v1/chat/completions",
    model: opts.model ?? "m",
    isStreaming: opts.stream ?? false,
    body: opts.body ?? `{"model":"${opts.model ?? "m"}"}`,
    headers: opts.headers ?? {},
  };
}

/** A client request's event at `opts.atMs`, else at the state's clock. */
export function requestEvent(
  state: State,
  requestId: string,
  opts: RequestOpts = {},
): Extract<Event, { kind: "requestReceived" }> {
  return requestReceived(requestId, {
    ...opts,
    atMs: opts.atMs ?? state.nowMs,
  });
}

/** A client request arrives; returns its effects. */
export function addRequest(
  state: State,
  requestId: string,
  opts: RequestOpts = {},
): Effect[] {
  return step(state, requestEvent(state, requestId, opts));
}

export function chunk(
  state: State,
  workerId: string,
  requestId: string,
  text: string,
  atMs = state.nowMs,
): Effect[] {
  return step(state, {
    kind: "chunkReceived",
    atMs,
    workerId,
    requestId,
    chunk: text,
  });
}

/** A worker's response_complete for `requestId`: 200, no headers, empty body unless given. */
export function completeEvent(
  workerId: string,
  requestId: string,
  opts: CompleteOpts = {},
): Extract<Event, { kind: "completeReceived" }> {
  return {
    kind: "completeReceived",
    atMs: opts.atMs ?? 0,
    workerId,
    requestId,
    statusCode: opts.status ?? 200,
    headers: opts.headers ?? {},
    body: opts.body ?? "",
    tokenCounts: null,
  };
}

export type CompleteOpts = {
  atMs?: number;
  status?: number;
  headers?: Headers;
  body?: string;
};

export function complete(
  state: State,
  workerId: string,
  requestId: string,
  opts: CompleteOpts = {},
): Effect[] {
  return step(
    state,
    completeEvent(workerId, requestId, {
      ...opts,
      atMs: opts.atMs ?? state.nowMs,
    }),
  );
}

export function tick(state: State, atMs: number): Effect[] {
  return step(state, { kind: "tick", atMs });
}

export function pong(
  state: State,
  workerId: string,
  currentLoad: number | null,
  atMs = state.nowMs,
): Effect[] {
  return step(state, { kind: "pongReceived", atMs, workerId, currentLoad });
}

export function disconnect(
  state: State,
  workerId: string,
  atMs = state.nowMs,
): Effect[] {
  return step(state, {
    kind: "workerDisconnected",
    atMs,
    workerId,
    reason: "socket closed",
  });
}

export function clientGone(
  state: State,
  requestId: string,
  atMs = state.nowMs,
): Effect[] {
  return step(state, { kind: "clientDisconnected", atMs, requestId });
}

/** A worker's models_update (C26), at `atMs` 0 unless given. */
export function modelsUpdate(
  workerId: string,
  models: string[],
  opts: { atMs?: number; currentLoad?: number | null; draining?: boolean } = {},
): Extract<Event, { kind: "modelsUpdateReceived" }> {
  return {
    kind: "modelsUpdateReceived",
    atMs: opts.atMs ?? 0,
    workerId,
    models,
    currentLoad: opts.currentLoad ?? null,
    ...(opts.draining === undefined ? {} : { draining: opts.draining }),
  };
}

/** A worker's error frame, about `requestId` or (null) about none. */
export function workerError(
  workerId: string,
  requestId: string | null,
  code: string,
  message: string,
  atMs = 0,
): Extract<Event, { kind: "workerErrorReceived" }> {
  return {
    kind: "workerErrorReceived",
    atMs,
    workerId,
    requestId,
    code,
    message,
  };
}

/** The operator drains a worker (C28). */
export function drainRequested(
  workerId: string,
  reason: string,
  atMs = 0,
): Extract<Event, { kind: "workerDrainRequested" }> {
  return { kind: "workerDrainRequested", atMs, workerId, reason };
}

// ---- effect filters ------------------------------------------------------------

export function kinds(effects: Effect[]): EffectKind[] {
  return effects.map((e) => e.kind);
}

/** Effects without logs: what the shell actually does. */
export function actions(effects: Effect[]): Effect[] {
  return effects.filter((e) => e.kind !== "log");
}

export function ofKind<K extends EffectKind>(
  effects: Effect[],
  kind: K,
): Extract<Effect, { kind: K }>[] {
  return effects.filter((e): e is Extract<Effect, { kind: K }> =>
    e.kind === kind
  );
}

export function only<K extends EffectKind>(
  effects: Effect[],
  kind: K,
): Extract<Effect, { kind: K }> {
  const found = ofKind(effects, kind);
  if (found.length !== 1) {
    throw new Error(
      `expected exactly one ${kind} effect, got ${found.length}: ${
        JSON.stringify(effects)
      }`,
    );
  }
  return found[0]!;
}

/** Messages sent to workers, optionally only to one worker and of one type. */
export function sent<T extends ServerMessage["type"]>(
  effects: Effect[],
  type: T,
  workerId?: string,
): (Extract<ServerMessage, { type: T }> & { to: string })[] {
  const out: (Extract<ServerMessage, { type: T }> & { to: string })[] = [];
  for (const e of effects) {
    if (e.kind !== "sendToWorker" || e.message.type !== type) continue;
    if (workerId !== undefined && e.workerId !== workerId) continue;
    out.push({
      ...(e.message as Extract<ServerMessage, { type: T }>),
      to: e.workerId,
    });
  }
  return out;
}

/** request_ids dispatched in these effects, in order, with the worker each went to. */
export function dispatched(effects: Effect[]): [string, string][] {
  return sent(effects, "request").map((m) => [m.request_id, m.to]);
}

/** A client request arrives; returns what its arrival dispatched, as `dispatched`. */
export function routed(
  state: State,
  requestId: string,
  opts: RequestOpts = {},
): [string, string][] {
  return dispatched(addRequest(state, requestId, opts));
}

export function logs(effects: Effect[], message: string): Effect[] {
  return effects.filter((e) => e.kind === "log" && e.message === message);
}

export function worker(state: State, id: string): Worker {
  const w = state.workers.get(id);
  if (w === undefined) throw new Error(`no worker ${id}`);
  return w;
}

export function statusOf(state: State, requestId: string): string | undefined {
  return state.requests.get(requestId)?.status.kind;
}

export function queued(state: State, provider = "local"): string[] {
  return queuedIds(state, provider);
}

/** A lifecycle task as the views read it: a model load, one part running on w1. */
export function taskView(
  overrides: Partial<LifecycleTaskView> = {},
  part: Partial<LifecyclePart> = {},
): LifecycleTaskView {
  return {
    id: "load-1",
    operation: "model-load",
    modelId: "m",
    params: {},
    createdAtMs: 0,
    updatedAtMs: 0,
    finishedAtMs: null,
    status: "running",
    progress: 0,
    error: null,
    parts: [{
      workerId: "w1",
      workerName: "gpu-1",
      status: "running",
      progress: 0,
      error: null,
      result: null,
      deadlineAtMs: 0,
      ...part,
    }],
    ...overrides,
  };
}
