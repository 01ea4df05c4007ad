// Client-facing errors in each route's own shape (C47): OpenAI routes answer
// {"error":{"message","type","code"}}, /v1/messages answers Anthropic's
// {"type":"error","error":{"type","message"}}. Started streams end with an SSE
// error event in the same shape instead (C24, C48).
import type { ClientApi, ClientError } from "../../../core/mod.ts";

function openAiType(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 429) return "rate_limit_error";
  if (status < 500) return "invalid_request_error";
  return "server_error";
}

function anthropicType(status: number): string {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    case 504:
      return "timeout_error";
    default:
      return status < 500 ? "invalid_request_error" : "api_error";
  }
}

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

export function errorBody(api: ClientApi, error: ClientError): string {
  if (api === "anthropic") {
    return JSON.stringify({
      type: "error",
      error: {
        type: anthropicType(error.status),
        message: error.message,
        // The relay's own code too (C60): Anthropic's types are few, and a
        // client must tell backend_stream_broken from any other api_error.
        code: error.code,
        ...details(error),
      },
    });
  }
  return JSON.stringify({
    error: {
      message: error.message,
      type: openAiType(error.status),
      code: error.code,
      ...details(error),
    },
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
