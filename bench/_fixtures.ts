// Benchmark fixtures: states with N registered workers and M open or queued
// requests, built once at module scope (conventions §9).
import {
  type Event,
  initialState,
  makeConfig,
  reduce,
  type State,
} from "../core/mod.ts";

export function stateWithWorkers(
  workers: number,
  maxConcurrent = 4,
  queueLenMax = 20_000,
  extensions?: string[],
): State {
  const state = initialState(
    makeConfig({ queueLenMax, requestTimeoutMs: 1e12, queueTimeoutMs: 1e12 }),
  );
  for (let i = 0; i < workers; i++) {
    addWorker(state, `w${i}`, {
      models: ["m"],
      maxConcurrent,
      ...(extensions === undefined ? {} : { extensions }),
    });
  }
  return state;
}

/** Connects (auth ok) and registers one worker, as a real one does. */
export function addWorker(
  state: State,
  workerId: string,
  opts: { models: string[]; maxConcurrent: number; extensions?: string[] },
): void {
  reduce(state, {
    kind: "workerConnectAttempted",
    atMs: 0,
    workerId,
    provider: "local",
    clientIp: "10.0.0.1",
    secretValid: true,
  });
  reduce(state, {
    kind: "registerReceived",
    atMs: 0,
    workerId,
    workerName: workerId,
    models: opts.models,
    maxConcurrent: opts.maxConcurrent,
    protocolVersion: "1",
    currentLoad: 0,
    ...(opts.extensions === undefined ? {} : { extensions: opts.extensions }),
  });
}

/** The worker's 200 with an empty body, ending `requestId`. */
export function completed(requestId: string, workerId: string): Event {
  return {
    kind: "completeReceived",
    atMs: 1,
    workerId,
    requestId,
    statusCode: 200,
    headers: {},
    body: "",
    tokenCounts: null,
  };
}

export function request(
  requestId: string,
  model = "m",
  isStreaming = true,
): Event {
  return {
    kind: "requestReceived",
    atMs: 0,
    requestId,
    api: "openai",
    endpointPath: "/v1/chat/completions",
    model,
    isStreaming,
    body: '{"model":"m"}',
    headers: {},
  };
}

/**
 * A non-streaming request for `model` goes to the best worker and completes
 * there (its slot freed): the dispatch path end to end.
 */
export function dispatchAndComplete(
  state: State,
  requestId: string,
  model: string,
): void {
  const effects = reduce(state, request(requestId, model, false)).effects;
  const send = effects.find((e) => e.kind === "sendToWorker");
  if (send?.kind !== "sendToWorker") throw new Error("not dispatched");
  reduce(state, completed(requestId, send.workerId));
}

/**
 * Opens `n` streaming requests and returns (requestId, workerId) pairs; ids
 * `r0`, `r1`... unless `idOf` names them (the server's are 40 characters).
 */
export function openStreams(
  state: State,
  n: number,
  idOf: (i: number) => string = (i) => `r${i}`,
): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i < n; i++) {
    const id = idOf(i);
    const effects = reduce(state, request(id)).effects;
    const send = effects.find((e) => e.kind === "sendToWorker");
    if (send === undefined || send.kind !== "sendToWorker") {
      throw new Error("not dispatched");
    }
    out.push([id, send.workerId]);
  }
  return out;
}

/** A llama-server-like non-streaming answer's body, for `model`. */
export function chatCompletionBody(model: string): string {
  return JSON.stringify({
    id: "chatcmpl-1",
    object: "chat.completion",
    created: 1,
    model,
    choices: [{
      index: 0,
      message: { role: "assistant", content: "Hello there, how are you?" },
      finish_reason: "stop",
    }],
    usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 },
  });
}
