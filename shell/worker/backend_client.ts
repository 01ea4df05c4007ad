// Forwards one request to the local backend. Streaming answers are passed on read
// by read (one response_chunk per read, decoded with a streaming UTF-8 decoder so
// a character split across reads survives, C45); everything else ends in one
// response_complete carrying the backend's real status and body.
import { FORWARDED_HEADERS } from "../../core/mod.ts";
import type { RequestMessage } from "../../core/protocol/mod.ts";
import type { Completion } from "./decide.ts";
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

/**
 * Returns the completion to send, or null when `signal` aborted the request
 * (a cancel: the caller has already answered it).
 */
export async function forwardToBackend(
  backendUrl: string,
  request: RequestMessage,
  signal: AbortSignal,
  onChunk: (chunk: string) => void,
): Promise<Completion | null> {
  const url = backendUrl + request.endpoint_path;
  // Only the allow-listed headers reach the backend, whatever the server sent.
  const headers = copyHeaders(
    Object.entries(request.headers ?? {}).filter(([k]) =>
      FORWARDED_HEADERS.has(k.toLowerCase())
    ),
  );
  headers["content-type"] ??= "application/json";
  let response: Response;
  try {
    response = await fetch(url, {
      method: "POST",
      headers,
      body: request.body,
      signal,
    });
  } catch (e) {
    if (signal.aborted) return null;
    const reason = e instanceof Error ? e.message : String(e);
    return failure(
      request,
      502,
      "backend_unreachable",
      `backend unreachable at ${backendUrl}: ${reason}`,
    );
  }
  const responseHeaders = copyHeaders(response.headers);
  try {
    if (!request.is_streaming || !response.ok || response.body === null) {
      // Errors of a streaming request arrive as one JSON body: pass it whole.
      const body = await response.text();
      const counts = response.ok ? tokenCountsFromBody(body) : null;
      return {
        status_code: response.status,
        headers: responseHeaders,
        body,
        token_counts: counts,
      };
    }
    return await pipeStream(response, responseHeaders, onChunk);
  } catch (e) {
    if (signal.aborted) return null;
    const reason = e instanceof Error ? e.message : String(e);
    return failure(
      request,
      502,
      "backend_error",
      `backend response failed: ${reason}`,
    );
  }
}

async function pipeStream(
  response: Response,
  headers: Record<string, string>,
  onChunk: (chunk: string) => void,
): Promise<Completion> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  const usage = newUsageScan();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const text = decoder.decode(value, { stream: true });
    // A read holding only the first byte(s) of a character decodes to "".
    if (text === "") continue;
    onChunk(text);
    scanChunk(usage, text);
  }
  const rest = decoder.decode();
  if (rest !== "") {
    onChunk(rest);
    scanChunk(usage, rest);
  }
  return {
    status_code: response.status,
    headers,
    body: "",
    token_counts: scanResult(usage),
  };
}

/** GET {backendUrl}/v1/models; throws an Error whose message says what failed. */
export async function listBackendModels(
  backendUrl: string,
  signal: AbortSignal,
): Promise<string[]> {
  const url = `${backendUrl}/v1/models`;
  let response: Response;
  try {
    response = await fetch(url, { signal });
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
