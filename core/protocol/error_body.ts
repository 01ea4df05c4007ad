// The JSON error body a client gets, in its route's shape, whichever layer
// writes it: the server (shell/server/http/errors.ts), the worker core
// (core/worker/answers.ts) or the worker shell (shell/worker/answer_readers.ts).
// One rule, so the same 502 reads the same wherever it was produced (issue 27).
//   OpenAI:    {"error":{"message","type","code"}};
//   Anthropic: {"type":"error","error":{"type","message","code"}}, plus the
//              relay's own `code`: Anthropic's types are few.
// `type` is the catalogue's (errors.ts `errorType`), the one status -> type map.
import type { ClientApi } from "../vocabulary.ts";
import { errorType } from "./errors.ts";

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

/** The body's bytes (as text), the one way every layer writes a client error. */
export function routeErrorBody(shape: ClientApi, e: ErrorFields): string {
  const details = e.details ?? {};
  if (shape === "anthropic") {
    return JSON.stringify({
      type: "error",
      error: {
        type: errorType(shape, e.status),
        message: e.message,
        code: e.code,
        ...details,
      },
    });
  }
  return JSON.stringify({
    error: {
      message: e.message,
      type: errorType(shape, e.status),
      code: e.code,
      ...details,
    },
  });
}
