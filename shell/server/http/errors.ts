// Client-facing errors in each route's own shape (C47): OpenAI routes answer
// {"error":{"message","type","code"}}, /v1/messages answers Anthropic's
// {"type":"error","error":{"type","message"}}. Started streams end with an SSE
// error event in the same shape instead (C24, C48).
import {
  type ClientApi,
  type ClientError,
  routeErrorBody,
} from "../../../core/mod.ts";

/**
 * Spec 004 detail fields go inside the error object (`limit`, `remaining`,
 * `resetAt`, `queueDepth`, `avgWaitMs`). `resetInMs` from the core becomes the
 * wall-clock `resetAt` (unix seconds) here, since the core has no wall clock.
 */
function details(error: ClientError): Record<string, number | string> {
  const out: Record<string, number | string> = {};
  for (const [k, v] of Object.entries(error.details ?? {})) {
    if (k === "resetInMs") {
      out.resetAt = Math.ceil((Date.now() + Number(v)) / 1000);
    } else out[k] = v;
  }
  return out;
}

/** The client's error body in its route's shape (core/protocol/error_body.ts, shared with the worker). */
export function errorBody(api: ClientApi, error: ClientError): string {
  return routeErrorBody(api, {
    status: error.status,
    code: error.code,
    message: error.message,
    details: details(error),
  });
}

export function errorHeaders(error: ClientError): Record<string, string> {
  const headers: Record<string, string> = {
    "content-type": "application/json",
  };
  if (error.retryAfterSecs !== undefined) {
    headers["retry-after"] = String(error.retryAfterSecs);
  }
  return headers;
}

/** The SSE event that ends a started stream with an error. */
export function sseErrorEvent(api: ClientApi, error: ClientError): string {
  const body = errorBody(api, error);
  return api === "anthropic"
    ? `event: error\ndata: ${body}\n\n`
    : `data: ${body}\n\n`;
}
