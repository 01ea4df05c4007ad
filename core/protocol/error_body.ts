// The JSON error body a client gets, in its route's shape, whichever layer
// writes it: the server (shell/server/http/errors.ts), the worker core
// (core/worker/answers.ts) or the worker shell (shell/worker/answer_readers.ts).
// One rule, so the same 502 reads the same wherever it was produced (issue 27).
//   OpenAI:    {"error":{"message","type","code"}}, `type` one of OpenAI's
//              (invalid_request_error, authentication_error, permission_error,
//              rate_limit_error, server_error);
//   Anthropic: {"type":"error","error":{"type","message","code"}}, `type` one
//              of Anthropic's (invalid_request_error, authentication_error,
//              permission_error, not_found_error, request_too_large,
//              rate_limit_error, api_error, overloaded_error, timeout_error),
//              plus the relay's own `code`: Anthropic's types are few.
import type { ClientApi } from "../vocabulary.ts";

/** What an error says; `details` (spec 004: limit, remaining, resetAt, ...) go inside the error object. */
export type ErrorFields = {
  status: number;
  code: string;
  message: string;
  details?: Record<string, number | string>;
};

/** The route's error shape: Anthropic's for /v1/messages (and below it), OpenAI's for every other path. */
export function errorShapeOf(endpointPath: string | null): ClientApi {
  return endpointPath?.startsWith("/v1/messages") === true
    ? "anthropic"
    : "openai";
}

export function openAiErrorType(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 429) return "rate_limit_error";
  if (status < 500) return "invalid_request_error";
  return "server_error";
}

export function anthropicErrorType(status: number): string {
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

/** The body's bytes (as text), the one way every layer writes a client error. */
export function routeErrorBody(shape: ClientApi, e: ErrorFields): string {
  const details = e.details ?? {};
  if (shape === "anthropic") {
    return JSON.stringify({
      type: "error",
      error: {
        type: anthropicErrorType(e.status),
        message: e.message,
        code: e.code,
        ...details,
      },
    });
  }
  return JSON.stringify({
    error: {
      message: e.message,
      type: openAiErrorType(e.status),
      code: e.code,
      ...details,
    },
  });
}
