// Forwards one request to the local backend. Streaming answers are passed on read
// by read (one response_chunk per read, decoded with a streaming UTF-8 decoder so
// a character split across reads survives, C45); everything else ends in one
// response_complete carrying the backend's real status and body.
import http from "node:http";
import https from "node:https";
import { urlToHttpOptions } from "node:url";
import { FORWARDED_HEADERS } from "../../core/mod.ts";
import type { RequestMessage } from "../../core/protocol/mod.ts";
import type { Completion } from "../../core/worker/decide.ts";
import {
  newUsageScan,
  scanChunk,
  scanResult,
  tokenCountsFromBody,
} from "./usage.ts";

// Hop-by-hop or recomputed by fetch: never copied between the two hops.
const SKIPPED_HEADERS = new Set([
  "host",
  "connection",
  "content-length",
  "transfer-encoding",
  "keep-alive",
  "upgrade",
]);

function copyHeaders(from: Iterable<[string, string]>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of from) {
    const lower = name.toLowerCase();
    if (!SKIPPED_HEADERS.has(lower)) out[lower] = value;
  }
  return out;
}

/** The route's own error shape (Anthropic for /v1/messages, else OpenAI). */
export function errorBody(
  endpointPath: string,
  code: string,
  message: string,
): string {
  if (endpointPath.startsWith("/v1/messages")) {
    return JSON.stringify({ type: "error", error: { type: code, message } });
  }
  return JSON.stringify({ error: { message, type: code, code } });
}

function failure(
  request: RequestMessage,
  status: number,
  code: string,
  message: string,
): Completion {
  return {
    status_code: status,
    headers: { "content-type": "application/json" },
    body: errorBody(request.endpoint_path, code, message),
    token_counts: null,
  };
}

/** Keep-alive pools to the backend, one per scheme. */
const AGENTS = {
  http: new http.Agent({ keepAlive: true }),
  https: new https.Agent({ keepAlive: true }),
};

type TargetOptions = ReturnType<typeof urlToHttpOptions>;

/** Parsed backend URLs by full URL; a few routes, bounded all the same. */
const TARGETS = new Map<string, TargetOptions>();
const TARGETS_MAX = 64;

/**
 * The request options of a backend URL, what http.request(url) derives from it
 * (urlToHttpOptions), parsed once per URL: parsing it per request was ~4 µs of
 * the worker's (d) profile (issue 10). Throws like `new URL` on a bad URL.
 */
function targetOptions(href: string): TargetOptions {
  let t = TARGETS.get(href);
  if (t === undefined) {
    t = urlToHttpOptions(new URL(href));
    if (TARGETS.size < TARGETS_MAX) TARGETS.set(href, t);
  }
  return t;
}

function headerEntries(
  headers: http.IncomingHttpHeaders,
): [string, string][] {
  const out: [string, string][] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) {
      out.push([name, Array.isArray(value) ? value.join(", ") : value]);
    }
  }
  return out;
}

/** Where the backend is and the key it wants (BACKEND_API_KEY), if any. */
export type Backend = { url: string; apiKey: string | null };

/** The worker's own backend key replaces whatever the client sent. */
function authorize(headers: Record<string, string>, backend: Backend): void {
  if (backend.apiKey !== null) {
    headers["authorization"] = `Bearer ${backend.apiKey}`;
  }
}

/**
 * Returns the completion to send, or null when `signal` aborted the request
 * (a cancel: the caller has already answered it).
 *
 * node:http rather than fetch (issue 10, measured): Deno's fetch body reader
 * costs ~30 µs per read, 4-8x node:http's per-chunk cost, and it was the
 * worker's largest cost while streaming. Chunks that arrive in one socket read
 * are passed on as one string (flushed in a microtask, so nothing waits for a
 * later read): fewer frames, the same bytes in the same order.
 */
export function forwardToBackend(
  backend: Backend,
  request: RequestMessage,
  signal: AbortSignal,
  onChunk: (chunk: string) => void,
): Promise<Completion | null> {
  // Only the allow-listed headers reach the backend, whatever the server sent.
  const headers: Record<string, string> = {};
  const from = request.headers ?? {};
  for (const name in from) {
    const lower = name.toLowerCase();
    if (FORWARDED_HEADERS.has(lower) && !SKIPPED_HEADERS.has(lower)) {
      headers[lower] = from[name]!;
    }
  }
  authorize(headers, backend);
  headers["content-type"] ??= "application/json";
  const backendUrl = backend.url;
  headers["content-length"] = String(Buffer.byteLength(request.body, "utf8"));
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(null);
    let settled = false;
    const done = (c: Completion | null) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener("abort", onAbort);
      resolve(signal.aborted ? null : c);
    };
    const onAbort = () => {
      req.destroy();
      done(null);
    };
    let target: TargetOptions;
    try {
      target = targetOptions(backendUrl + request.endpoint_path);
    } catch (e) {
      return done(failure(
        request,
        502,
        "backend_unreachable",
        `backend unreachable at ${backendUrl}: ${(e as Error).message}`,
      ));
    }
    const tls = target.protocol === "https:";
    // What request(url, options) builds itself: the URL's options, then ours.
    const req = (tls ? https : http).request({
      ...target,
      method: "POST",
      headers,
      agent: tls ? AGENTS.https : AGENTS.http,
    }, (res) => {
      const status = res.statusCode ?? 502;
      const responseHeaders = copyHeaders(headerEntries(res.headers));
      const ok = status >= 200 && status < 300;
      // A string decoder: a character split across reads survives (C45).
      res.setEncoding("utf8");
      const broken = () =>
        done(failure(
          request,
          502,
          "backend_error",
          "backend response failed: the backend closed the connection mid-answer",
        ));
      res.on("error", broken);
      res.on("close", () => {
        if (!res.complete) broken();
      });
      if (!request.is_streaming || !ok) {
        // Errors of a streaming request arrive as one JSON body: pass it whole.
        let body = "";
        res.on("data", (s: string) => body += s);
        res.on("end", () =>
          done({
            status_code: status,
            headers: responseHeaders,
            body,
            token_counts: ok ? tokenCountsFromBody(body) : null,
          }));
        return;
      }
      const usage = newUsageScan();
      let pending = "";
      const flush = () => {
        if (pending === "" || settled) return;
        const text = pending;
        pending = "";
        onChunk(text);
        scanChunk(usage, text);
      };
      res.on("data", (s: string) => {
        if (s === "") return;
        if (pending === "") queueMicrotask(flush);
        pending += s;
      });
      res.on("end", () => {
        flush();
        done({
          status_code: status,
          headers: responseHeaders,
          body: "",
          token_counts: scanResult(usage),
        });
      });
    });
    req.on("error", (e) => {
      done(failure(
        request,
        502,
        "backend_unreachable",
        `backend unreachable at ${backendUrl}: ${e.message}`,
      ));
    });
    signal.addEventListener("abort", onAbort, { once: true });
    req.end(request.body);
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
    data = (JSON.parse(text) as { data?: unknown }).data;
  } catch {
    throw new Error(`${url} did not answer JSON`);
  }
  if (!Array.isArray(data)) throw new Error(`${url} answer has no "data" list`);
  return data.map((m) => (m as { id?: unknown })?.id).filter((
    id,
  ): id is string => typeof id === "string" && id !== "");
}
