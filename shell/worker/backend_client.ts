// Forwards one request to the local backend: the headers it may see, the HTTP
// client that carries it (the worker's own HTTP/1.1 client for http:, node:https
// for https:), cancellation. How the answer is read and passed on is
// answer_readers.ts. A backend that fails without a complete answer is reported
// as such, not as an answer, so the worker core can have the request retried
// elsewhere.
import http from "node:http";
import https from "node:https";
import { urlToHttpOptions } from "node:url";
import { exchange, type RequestTarget } from "./http1/exchange.ts";
import { type Deadline, makeDeadlines } from "./deadlines.ts";
import {
  asksUsageOn,
  flavourOf,
  type UsageAskFlavour,
  withUsageAsk,
} from "./usage_ask.ts";
import { forwardableHeaders } from "../../core/mod.ts";
import { pieceBytes } from "../piece_bytes.ts";
import { assertNever } from "../../core/assert_never.ts";
import type { RequestMessage } from "../../core/protocol/mod.ts";
import {
  type AnswerBody,
  type AnswerSink,
  type BackendOutcome,
  type Call,
  protocolErrorAnswer,
  readAnswer,
} from "./answer_readers.ts";
export {
  type AnswerSink,
  type BackendOutcome,
  BODY_PIECE_CHARS,
  RESPONSE_FRAME_BYTES_MAX,
} from "./answer_readers.ts";

/**
 * node:https's keep-alive pool, for https: backends; http: backends go through
 * the worker's own HTTP/1.1 client (http1/, issue 18).
 */
const HTTPS_AGENT = new https.Agent({ keepAlive: true });

/**
 * node:http with an env proxy (NODE_USE_ENV_PROXY=1 with HTTP_PROXY, Deno 2.9)
 * sends plain requests through the proxy; the worker's own client has no proxy
 * support, so node:http (and its Agent) keeps those.
 */
const HTTP_AGENT = new http.Agent({ keepAlive: true });
const ENV_PROXY = (() => {
  // Asked first: a worker run without --allow-env must not be prompted.
  const env = { name: "env", variable: "NODE_USE_ENV_PROXY" } as const;
  if (Deno.permissions.querySync(env).state !== "granted") return false;
  return (Deno.env.get("NODE_USE_ENV_PROXY") ?? "") !== "";
})();

type TargetOptions = ReturnType<typeof urlToHttpOptions>;

/** A backend URL parsed: node's request options, and our client's target for http:. */
type Target = { options: TargetOptions; plain: RequestTarget | null };

/**
 * Parsed backend URLs by backend URL, then by endpoint path (issue 31: no
 * joined string to hash per request); a few routes, bounded all the same.
 */
const TARGETS = new Map<string, Map<string, Target>>();
const TARGETS_MAX = 64;
let targetsKept = 0;

/**
 * The request options of `backendUrl + path`, what http.request(url) derives
 * from it (urlToHttpOptions), parsed once per URL: parsing it per request was
 * ~4 µs of the worker's (d) profile (issue 10). Throws like `new URL` on a bad
 * URL.
 */
function targetOf(backendUrl: string, path: string): Target {
  let paths = TARGETS.get(backendUrl);
  let t = paths?.get(path);
  if (t === undefined) {
    const options = urlToHttpOptions(new URL(backendUrl + path));
    t = {
      options,
      plain: options.protocol === "http:" && !ENV_PROXY
        ? {
          host: options.hostname || "localhost",
          port: Number(options.port) || 80,
          path: options.path ?? "/",
          auth: options.auth ?? null,
        }
        : null,
    };
    if (targetsKept < TARGETS_MAX) {
      if (paths === undefined) TARGETS.set(backendUrl, paths = new Map());
      paths.set(path, t);
      targetsKept++;
    }
  }
  return t;
}

/** Every call's BACKEND_HEAD_TIMEOUT_SECS, on one timer (deadlines.ts). */
const HEAD_DEADLINES = makeDeadlines();

/** Where the backend is and the key it wants (BACKEND_API_KEY), if any. */
export type Backend = {
  url: string;
  apiKey: string | null;
  /**
   * BACKEND_HEAD_TIMEOUT_SECS in ms (C63): the longest wait for the response
   * head; 0 or absent, no limit of the worker's own.
   */
  headTimeoutMs?: number;
  /**
   * What the backend is, as its GET /v1/models named it (issue 33): whether
   * streams may be asked for usage (usage_ask.ts). Set by listBackendModels;
   * absent = not known, never asked.
   */
  flavour?: UsageAskFlavour | null;
};

/** The worker's own backend key replaces whatever the client sent. */
function authorize(headers: Record<string, string>, backend: Backend): void {
  if (backend.apiKey !== null) {
    headers["authorization"] = `Bearer ${backend.apiKey}`;
  }
}

/**
 * Forwards `request` and reports how it ended, as a promise; `signal` cancels
 * it. startBackendCall's promise form (the tests'; the worker uses that).
 */
export function forwardToBackend(
  backend: Backend,
  request: RequestMessage,
  signal: AbortSignal,
  sink: AnswerSink,
): Promise<BackendOutcome> {
  return forwardToBackendVia("own", backend, request, signal, sink);
}

/**
 * forwardToBackend, with http: backends read by the worker's own client
 * ("own", what the worker uses) or by node:http ("node": the differential
 * test's reference, http1/client_diff_test.ts).
 */
export function forwardToBackendVia(
  via: "own" | "node",
  backend: Backend,
  request: RequestMessage,
  signal: AbortSignal,
  sink: AnswerSink,
): Promise<BackendOutcome> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve({ kind: "cancelled" });
    let cancel = () => {};
    cancel = startBackendCall(via, backend, request, sink, (o) => {
      signal.removeEventListener("abort", cancel);
      resolve(o);
    });
    signal.addEventListener("abort", cancel, { once: true });
  });
}

/**
 * Forwards `request`; `settle` hears how it ended, once (perhaps before this
 * returns, when it fails at once). Returns its cancel: the backend connection
 * is closed and `settle` hears "cancelled", unless it has heard already.
 *
 * A callback, not a promise (issue 31): no promise, `then` or AbortSignal
 * per request, and the outcome is dispatched as it happens, not a microtask
 * later.
 *
 * node:http rather than fetch (issue 10, measured): Deno's fetch body reader
 * costs ~30 µs per read, 4-8x node:http's per-chunk cost, and it was the
 * worker's largest cost while streaming. Chunks that arrive in one socket read
 * are passed on as one string (flushed in a microtask, so nothing waits for a
 * later read): fewer frames, the same bytes in the same order.
 *
 * Memory stays bounded: a stream or a chunked body is read only while the
 * proxy link has room (`sink.hasRoom`), and a buffered body stops at
 * RESPONSE_FRAME_BYTES_MAX.
 */
export function startBackendCall(
  via: "own" | "node",
  backend: Backend,
  request: RequestMessage,
  sink: AnswerSink,
  settle: (outcome: BackendOutcome) => void,
): () => void {
  // Issue 33: a stream the client did not ask usage for is asked, where the
  // backend's answer stays exact without the usage chunk (usage_ask.ts).
  const asked = request.is_streaming && request.body_base64 == null &&
      asksUsageOn(backend.flavour ?? null, request.endpoint_path)
    ? withUsageAsk(request.body)
    : null;
  if (asked !== null) request = { ...request, body: asked };
  const headers = backendHeaders(request, backend);
  const backendUrl = backend.url;
  let settled = false;
  /** Whether any byte of the answer went to the proxy. */
  let started = false;
  let headDeadline: Deadline | null = null;
  const headArrived = () => {
    if (headDeadline !== null) HEAD_DEADLINES.cancel(headDeadline);
  };
  const done = (o: BackendOutcome) => {
    if (settled) return;
    settled = true;
    headArrived();
    settle(o);
  };
  /** Issue 33: what a reader holds back goes out before a break is reported. */
  let letGo = () => {};
  const failed = (why: string) => {
    if (!settled) letGo();
    done({
      kind: "failed",
      code: started ? "backend_stream_broken" : "backend_unavailable",
      message: why,
    });
  };
  let stop = () => {};
  const cancel = () => {
    stop();
    done({ kind: "cancelled" });
  };
  let target: Target;
  try {
    target = targetOf(backendUrl, request.endpoint_path);
  } catch (e) {
    failed(`backend unreachable at ${backendUrl}: ${(e as Error).message}`);
    return cancel;
  }
  /** Not HTTP: a 502 before any byte went out, else a broken stream (C61). */
  const invalid = (why: string) =>
    started ? failed(`backend response failed: ${why}`) : done({
      kind: "completed",
      completion: protocolErrorAnswer(request, why),
    });
  const call: Call = {
    done,
    failed,
    invalid,
    settled: () => settled,
    started: () => started,
    markStarted: () => {
      started = true;
    },
    headArrived,
    destroy: () => stop(),
    stripUsage: asked !== null,
    onBreak: (f) => letGo = f,
  };
  stop = target.plain !== null && via === "own"
    ? viaOwnClient(target.plain, headers, request, sink, call, backendUrl)
    : viaNode(target.options, headers, request, sink, call, backendUrl);
  const headMs = backend.headTimeoutMs ?? 0;
  if (headMs > 0 && !settled) {
    // C63: a backend that takes the request and never answers frees the
    // slot after this long; nothing went out, so another worker may run it.
    headDeadline = HEAD_DEADLINES.add(headMs, () => {
      stop();
      failed(
        `backend sent no response head within ${
          headMs / 1000
        } s (BACKEND_HEAD_TIMEOUT_SECS)`,
      );
    });
  }
  return cancel;
}

/** An http: backend through the worker's own HTTP/1.1 client (http1/, issue 18). Returns its stop. */
function viaOwnClient(
  target: RequestTarget,
  headers: Record<string, string>,
  request: RequestMessage,
  sink: AnswerSink,
  call: Call,
  backendUrl: string,
): () => void {
  let onData = (_: Buffer) => {};
  let onEnd = () => {};
  const ex = exchange(methodOf(request), target, headers, bodyOf(request), {
    response: (head) => {
      call.headArrived();
      readAnswer(
        head.status,
        head.headers,
        {
          onData: (f) => onData = f,
          onEnd: (f) => onEnd = f,
          // The exchange's own functions (they need no `this`): no wrapper
          // closures and no spread per answer (issue 31).
          pause: ex.pause,
          resume: ex.resume,
          isPaused: ex.isPaused,
        },
        request,
        sink,
        call,
      );
    },
    data: (bytes) => onData(bytes),
    end: () => onEnd(),
    failed: (kind, message) => {
      switch (kind) {
        case "unreachable":
          return call.failed(
            `backend unreachable at ${backendUrl}: ${message}`,
          );
        case "broken":
          return call.failed(message);
        case "invalid":
          return call.invalid(message);
        default:
          return assertNever(kind);
      }
    },
  });
  return () => ex.destroy();
}

/** Pausing and resuming a body's reading, on node's answer. */
function flowControlOf(
  body: { pause(): unknown; resume(): unknown; isPaused(): boolean },
): Pick<AnswerBody, "pause" | "resume" | "isPaused"> {
  return {
    pause: () => body.pause(),
    resume: () => body.resume(),
    isPaused: () => body.isPaused(),
  };
}

/** An https: backend (or one behind an env proxy) through node:https / node:http. Returns its stop. */
function viaNode(
  options: TargetOptions,
  headers: Record<string, string>,
  request: RequestMessage,
  sink: AnswerSink,
  call: Call,
  backendUrl: string,
): () => void {
  const tls = options.protocol === "https:";
  // What request(url, options) builds itself: the URL's options, then ours.
  const req = (tls ? https : http).request({
    ...options,
    method: methodOf(request),
    headers,
    agent: tls ? HTTPS_AGENT : HTTP_AGENT,
  }, (res) => {
    call.headArrived();
    onBroken(res, call);
    readAnswer(
      res.statusCode ?? 502,
      res.headers,
      {
        onData: (f) => res.on("data", f),
        onEnd: (f) => res.on("end", f),
        ...flowControlOf(res),
      },
      request,
      sink,
      call,
    );
  });
  req.on("error", (e) => {
    // node's parser errors (HPE_*): the backend answered, not in HTTP (C61).
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && code.startsWith("HPE_")) {
      return call.invalid(e.message);
    }
    call.failed(`backend unreachable at ${backendUrl}: ${e.message}`);
  });
  req.end(bodyOf(request));
  return () => req.destroy();
}

/** The client's method (the original's `method`, issue 25); absent = POST. */
function methodOf(request: RequestMessage): string {
  return request.method?.toUpperCase() || "POST";
}

/** The body to send: body-bytes-v1's bytes (issue 25), else the text. */
function bodyOf(request: RequestMessage): string | Buffer {
  return request.body_base64 == null
    ? request.body
    : Buffer.from(request.body_base64, "base64");
}

/** Only the allow-listed headers reach the backend, whatever the server sent. */
function backendHeaders(
  request: RequestMessage,
  backend: Backend,
): Record<string, string> {
  const headers = forwardableHeaders(request.headers ?? {});
  authorize(headers, backend);
  const body = bodyOf(request);
  // A bodiless GET (issue 25) is not labelled JSON.
  if (body.length > 0) headers["content-type"] ??= "application/json";
  headers["content-length"] = String(pieceBytes(body));
  return headers;
}

/** node:https: a backend that breaks off mid-answer fails the call. */
function onBroken(res: http.IncomingMessage, call: Call): void {
  const broken = () =>
    call.failed(
      "backend response failed: the backend closed the connection mid-answer",
    );
  res.on("error", broken);
  res.on("close", () => {
    if (!res.complete) broken();
  });
}

/** GET {backendUrl}/v1/models; throws an Error whose message says what failed. */
export async function listBackendModels(
  backend: Backend,
  signal: AbortSignal,
): Promise<string[]> {
  const url = `${backend.url}/v1/models`;
  const headers: Record<string, string> = {};
  authorize(headers, backend);
  let response: Response;
  try {
    response = await fetch(url, { signal, headers });
  } catch (e) {
    throw new Error(
      `could not reach ${url}: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
  const text = await response.text();
  if (!response.ok) throw new Error(`${url} answered ${response.status}`);
  let data: unknown;
  try {
    const answer = JSON.parse(text) as { data?: unknown };
    backend.flavour = flavourOf(answer) ?? backend.flavour ?? null;
    data = answer.data;
  } catch {
    throw new Error(`${url} did not answer JSON`);
  }
  if (!Array.isArray(data)) throw new Error(`${url} answer has no "data" list`);
  return data.map((m) => (m as { id?: unknown })?.id).filter((
    id,
  ): id is string => typeof id === "string" && id !== "");
}
