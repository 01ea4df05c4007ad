// What the mock backends answer with, shared by the one-model backend
// (backend.ts), the swapping router (swapping.ts), the lifecycle runner
// (runner.ts) and the extra endpoints (endpoints.ts).
import type { Answer } from "./formats.ts";

/** A JSON response; `extra` headers are added after the content type. */
export function json(
  status: number,
  value: unknown,
  extra: Record<string, string> = {},
): Response {
  return new Response(JSON.stringify(value), {
    status,
    headers: { "content-type": "application/json", ...extra },
  });
}

/** Resolves true after `ms`, or false as soon as `signal` aborts (timer cleared). */
export function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  if (ms <= 0) return Promise.resolve(true);
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * The answer to a request `body`, of the words and prompt count its backend
 * made up: created now, with a usage chunk when its stream_options ask.
 */
export function answerTo(
  body: Record<string, unknown>,
  made: Pick<Answer, "id" | "model" | "words" | "promptTokens">,
): Answer {
  const options = body.stream_options as
    | { include_usage?: unknown }
    | undefined;
  return {
    ...made,
    createdSecs: Math.floor(Date.now() / 1000),
    includeUsage: options?.include_usage === true,
  };
}
