// A mock OpenAI/Anthropic-compatible inference backend (stands in for llama-server,
// vLLM or Ollama) for tests, the demo and benchmarks. It streams a canned answer
// word by word and lets each request steer its behavior:
//
//   body `max_tokens` (or `max_completion_tokens`, `max_output_tokens`)
//                          number of word chunks to emit (default: the answer's words)
//   model `error-<status>` answer that status with the route's JSON error body
//   header `x-mock-status: <status>`  same as the model above
//   header `x-mock-delay-ms: <ms>`    per-chunk delay for this request
//   header `x-mock-split-utf8: 1`     write each streamed event in two writes cut
//                                     inside a multi-byte character (checks C45)
//   header `x-mock-echo-headers: 1`   reply header `x-mock-received-headers` holds
//                                     the request headers as a JSON object
//
// Faults, steered by body fields (they pass through the relay, headers do not):
//   `mock_delay_ms: <ms>`             per-chunk delay, as x-mock-delay-ms
//   `mock_fault: "die"`               the connection is cut mid-answer: a stream
//                                     after `mock_fault_after` words (default 2),
//                                     a JSON answer after its first bytes
//   `mock_fault: "reset"`             headers, then the connection is cut before
//                                     any body byte
//   `mock_body_chars: <n>`            a non-streaming answer whose content is n
//                                     characters ("x"), sent in 1 MiB writes
// Option `apiKey`: every route answers 401 without `Authorization: Bearer <key>`.
//
// Non-streaming answers wait delay × chunks before replying, like a real model.
import {
  type Answer,
  type Api,
  errorBody,
  jsonBody,
  streamEvents,
} from "./formats.ts";
import { otherEndpoint } from "./endpoints.ts";
import { answerTo, json, sleep } from "./respond.ts";

export type MockBackendOptions = {
  port?: number;
  hostname?: string;
  models?: string[];
  chunkDelayMs?: number;
  answer?: string;
  /** When set, requests without `Authorization: Bearer <apiKey>` get 401. */
  apiKey?: string;
};

export type MockBackendStats = {
  /** Inference requests seen (POST on the four routes). */
  requests: number;
  /** Requests whose client went away before the answer was fully sent. */
  aborted: number;
  /** Streams currently being written. */
  openStreams: number;
  /** Streams written to the end. */
  completedStreams: number;
  /** GET /v1/models calls. */
  modelListings: number;
  /** Headers of the latest inference request, lower-case names. */
  lastHeaders: Record<string, string>;
  /** Requests refused with 401 for a missing or wrong key (option apiKey). */
  unauthorized: number;
  /** Answers cut on purpose (`mock_fault`). */
  faults: number;
  /** Paths of the issue-25 endpoints called (mock/endpoints.ts), in order. */
  paths: string[];
};

export type MockBackend = {
  url: string;
  port: number;
  stats: MockBackendStats;
  /** Replaces the advertised model list (for model-refresh tests). */
  setModels(models: string[]): void;
  close(): Promise<void>;
};

const DEFAULT_ANSWER =
  "The quick brown fox jumps over the lazy dog while the relay streams every word in order.";

const ROUTES: Record<string, Api> = {
  "/v1/chat/completions": "chat",
  "/v1/completions": "completions",
  "/v1/responses": "responses",
  "/v1/messages": "messages",
};

type Ctx = {
  apiKey: string | null;
  models: string[];
  words: string[];
  delayMs: number;
  stats: MockBackendStats;
  closing: AbortController;
  nextId: number;
};

export function startMockBackend(
  opts: MockBackendOptions = {},
): Promise<MockBackend> {
  const ctx: Ctx = {
    apiKey: opts.apiKey ?? null,
    models: opts.models ?? ["mock-model"],
    words: splitWords(opts.answer ?? DEFAULT_ANSWER),
    delayMs: opts.chunkDelayMs ?? 30,
    stats: {
      requests: 0,
      aborted: 0,
      openStreams: 0,
      completedStreams: 0,
      modelListings: 0,
      lastHeaders: {},
      unauthorized: 0,
      faults: 0,
      paths: [],
    },
    closing: new AbortController(),
    nextId: 1,
  };
  return new Promise((resolve) => {
    const server = Deno.serve({
      port: opts.port ?? 0,
      hostname: opts.hostname ?? "127.0.0.1",
      onListen(addr) {
        resolve({
          url: `http://${addr.hostname}:${addr.port}`,
          port: addr.port,
          stats: ctx.stats,
          setModels(models) {
            ctx.models = models;
          },
          async close() {
            // Cut running streams first: shutdown() waits for open responses.
            ctx.closing.abort();
            await server.shutdown();
          },
        });
      },
    }, (req) => handle(ctx, req));
  });
}

/** Words keep their trailing space so the chunks concatenate to the answer. */
function splitWords(answer: string): string[] {
  return answer.match(/\S+\s*/g) ?? ["ok"];
}

async function handle(ctx: Ctx, req: Request): Promise<Response> {
  const path = new URL(req.url).pathname;
  if (
    ctx.apiKey !== null &&
    req.headers.get("authorization") !== `Bearer ${ctx.apiKey}`
  ) {
    ctx.stats.unauthorized++;
    await req.body?.cancel();
    return json(401, {
      error: { message: "invalid api key", type: "authentication_error" },
    });
  }
  if (req.method === "GET" && path === "/v1/models") {
    ctx.stats.modelListings++;
    return json(200, {
      object: "list",
      data: ctx.models.map((id) => ({
        id,
        object: "model",
        created: 0,
        owned_by: "mock",
      })),
    });
  }
  const other = otherEndpoint(req, path);
  if (other !== null) {
    ctx.stats.requests++;
    ctx.stats.paths.push(path);
    ctx.stats.lastHeaders = Object.fromEntries(req.headers);
    return await other;
  }
  const api = ROUTES[path];
  if (api === undefined || req.method !== "POST") {
    return json(404, {
      error: { message: `no route ${req.method} ${path}`, type: "not_found" },
    });
  }
  ctx.stats.requests++;
  const headers = Object.fromEntries(req.headers);
  ctx.stats.lastHeaders = headers;
  let body: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(await req.text());
    if (typeof parsed !== "object" || parsed === null) {
      throw new Error("not an object");
    }
    body = parsed as Record<string, unknown>;
  } catch {
    return json(400, errorBody(api, 400, "request body is not a JSON object"));
  }
  const extra: Record<string, string> = {};
  if (req.headers.get("x-mock-echo-headers") !== null) {
    extra["x-mock-received-headers"] = JSON.stringify(headers);
  }
  const model = typeof body.model === "string"
    ? body.model
    : ctx.models[0] ?? "mock-model";
  const status = requestedStatus(model, req.headers.get("x-mock-status"));
  if (status !== null) {
    return json(
      status,
      errorBody(api, status, `mock backend answered ${status} as asked`),
      extra,
    );
  }
  const answer = buildAnswer(ctx, body, model);
  const delayMs = numberHeader(req.headers.get("x-mock-delay-ms")) ??
    numberField(body.mock_delay_ms) ?? ctx.delayMs;
  if (body.mock_fault === "reset") {
    ctx.stats.faults++;
    return cutResponse("", "application/json");
  }
  if (body.stream === true) {
    const split = req.headers.get("x-mock-split-utf8") !== null;
    const dieAfter = body.mock_fault === "die"
      ? numberField(body.mock_fault_after) ?? 2
      : null;
    return streamResponse(
      ctx,
      api,
      answer,
      { delayMs, split, dieAfter },
      extra,
    );
  }
  const bodyChars = numberField(body.mock_body_chars);
  if (bodyChars !== null) {
    return hugeResponse(ctx.stats, api, { ...answer, words: [] }, bodyChars);
  }
  if (body.mock_fault === "die") {
    ctx.stats.faults++;
    return cutResponse(
      JSON.stringify(jsonBody(api, answer)).slice(0, 20),
      "application/json",
    );
  }
  return await delayedJson(
    ctx,
    req,
    delayMs * answer.words.length,
    () => json(200, jsonBody(api, answer), extra),
  );
}

/**
 * Waits like a model generating, then answers. The listener on `req.signal` is
 * removed before returning: Deno 2.9 also aborts that signal after a successful
 * response (legacy behavior) and warns when a listener sees it.
 */
async function delayedJson(
  ctx: Ctx,
  req: Request,
  ms: number,
  answer: () => Response,
): Promise<Response> {
  if (ms <= 0 || ctx.closing.signal.aborted) {
    return ctx.closing.signal.aborted
      ? json(503, { error: { message: "closing" } })
      : answer();
  }
  // Read req.signal only here: merely touching it makes Deno warn on success.
  const clientSignal = req.signal;
  const stop = new AbortController();
  const onClientAbort = () => {
    ctx.stats.aborted++;
    stop.abort();
  };
  const onClosing = () => stop.abort();
  clientSignal.addEventListener("abort", onClientAbort, { once: true });
  ctx.closing.signal.addEventListener("abort", onClosing, { once: true });
  try {
    const finished = await sleep(ms, stop.signal);
    return finished
      ? answer()
      : json(499, { error: { message: "request ended early" } });
  } finally {
    clientSignal.removeEventListener("abort", onClientAbort);
    ctx.closing.signal.removeEventListener("abort", onClosing);
  }
}

function requestedStatus(model: string, header: string | null): number | null {
  const m = /^error-(\d{3})$/.exec(model);
  const raw = m?.[1] ?? header;
  const n = raw === null || raw === undefined ? NaN : Number(raw);
  return Number.isInteger(n) && n >= 400 && n <= 599 ? n : null;
}

function numberField(value: unknown): number | null {
  return typeof value === "number" && Number.isFinite(value) && value >= 0
    ? value
    : null;
}

/** Headers and `head`, then the connection is cut: no complete answer ever. */
function cutResponse(head: string, contentType: string): Response {
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      if (head !== "") controller.enqueue(new TextEncoder().encode(head));
      // Erroring the body makes the server abort the connection mid-answer.
      setTimeout(() => controller.error(new Error("mock fault")), 20);
    },
  });
  return new Response(stream, {
    status: 200,
    headers: { "content-type": contentType },
  });
}

/** A JSON answer whose content is `chars` × "x", written 1 MiB at a time. */
function hugeResponse(
  stats: MockBackendStats,
  api: Api,
  answer: Answer,
  chars: number,
): Response {
  const marker = "MOCK_HUGE_BODY_MARKER";
  const [before, after] = JSON.stringify(
    jsonBody(api, { ...answer, words: [marker] }),
  ).split(marker) as [string, string];
  const piece = "x".repeat(1 << 20);
  const encoder = new TextEncoder();
  let left = chars;
  let state: "head" | "body" | "tail" | "done" = "head";
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      switch (state) {
        case "head":
          controller.enqueue(encoder.encode(before));
          state = "body";
          return;
        case "body": {
          const n = Math.min(left, piece.length);
          left -= n;
          if (n > 0) controller.enqueue(encoder.encode(piece.slice(0, n)));
          if (left === 0) state = "tail";
          return;
        }
        case "tail":
          controller.enqueue(encoder.encode(after));
          state = "done";
          return;
        case "done":
          controller.close();
          return;
      }
    },
    cancel() {
      stats.aborted++;
    },
  });
  return new Response(stream, {
    status: 200,
    headers: { "content-type": "application/json" },
  });
}

function numberHeader(value: string | null): number | null {
  if (value === null) return null;
  const n = Number(value);
  return Number.isFinite(n) && n >= 0 ? n : null;
}

function buildAnswer(
  ctx: Ctx,
  body: Record<string, unknown>,
  model: string,
): Answer {
  const limit = [
    body.max_tokens,
    body.max_completion_tokens,
    body.max_output_tokens,
  ]
    .find((v) => typeof v === "number" && Number.isInteger(v) && v >= 0) as
      | number
      | undefined;
  const count = limit ?? ctx.words.length;
  const words: string[] = [];
  for (let i = 0; i < count; i++) {
    const word = ctx.words[i % ctx.words.length] ?? "ok ";
    // When the answer repeats, keep a space between its last and first word.
    words.push(i < count - 1 && !/\s$/.test(word) ? word + " " : word);
  }
  return answerTo(body, {
    id: `mock-${ctx.nextId++}`,
    model,
    words,
    promptTokens: promptTokens(body),
  });
}

/** A deterministic stand-in for tokenization: whitespace-separated words of the input. */
function promptTokens(body: Record<string, unknown>): number {
  const input = JSON.stringify([
    body.messages,
    body.prompt,
    body.input,
    body.system,
  ]);
  return Math.max(1, input.split(/\s+/).length);
}

function streamResponse(
  ctx: Ctx,
  api: Api,
  answer: Answer,
  how: { delayMs: number; split: boolean; dieAfter: number | null },
  extra: Record<string, string>,
): Response {
  const { delayMs, split, dieAfter } = how;
  const events = streamEvents(api, answer);
  // The body's cancel() is how a streaming response learns the client went
  // away (req.signal is not watched: see delayedJson).
  const stop = new AbortController();
  const aborted = AbortSignal.any([ctx.closing.signal, stop.signal]);
  const encoder = new TextEncoder();
  let finished = false;
  const finish = (completed: boolean) => {
    if (finished) return;
    finished = true;
    ctx.stats.openStreams--;
    if (completed) ctx.stats.completedStreams++;
    else ctx.stats.aborted++;
  };
  ctx.stats.openStreams++;
  const stream = new ReadableStream<Uint8Array>({
    async start(controller) {
      const write = async (event: string): Promise<boolean> => {
        if (aborted.aborted) return false;
        if (!split) {
          controller.enqueue(encoder.encode(event));
          return true;
        }
        const [a, b] = splitInsideCharacter(encoder.encode(event));
        controller.enqueue(a);
        if (!(await sleep(Math.max(1, delayMs / 2), aborted))) return false;
        controller.enqueue(b);
        return true;
      };
      try {
        for (const e of events.head) if (!(await write(e))) return;
        let written = 0;
        for (const e of events.perWord) {
          if (!(await sleep(delayMs, aborted))) return;
          if (dieAfter !== null && written === dieAfter) {
            // The backend process dying: the connection drops mid-stream.
            ctx.stats.faults++;
            finish(false);
            controller.error(new Error("mock fault: died mid-stream"));
            return;
          }
          if (!(await write(e))) return;
          written++;
        }
        for (const e of events.tail) if (!(await write(e))) return;
        finish(true);
        controller.close();
      } catch {
        // enqueue after the reader cancelled: counted as aborted below.
      } finally {
        if (!finished) {
          finish(false);
          try {
            controller.close();
          } catch {
            // Already cancelled by the reader.
          }
        }
      }
    },
    cancel() {
      finish(false);
      stop.abort();
    },
  });
  return new Response(stream, {
    status: 200,
    headers: {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      ...extra,
    },
  });
}

/** Cuts after the first byte of the first multi-byte character, else in the middle. */
function splitInsideCharacter(bytes: Uint8Array): [Uint8Array, Uint8Array] {
  let cut = bytes.findIndex((b) => b >= 0xc0);
  cut = cut === -1 ? Math.floor(bytes.length / 2) : cut + 1;
  return [bytes.subarray(0, cut), bytes.subarray(cut)];
}
