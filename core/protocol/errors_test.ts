import assert from "node:assert/strict";
import { apiError, type ErrorCode, ERRORS, errorType } from "./errors.ts";
import { routeErrorBody } from "./error_body.ts";

const CODES = Object.keys(ERRORS) as ErrorCode[];

/** Any parameter a template reads: a placeholder string, so every entry builds. */
const ANY_PARAMS = new Proxy({}, {
  get: (_t, key) =>
    key === "retryAfterSecs" ? 7 : key === "status" ? 502 : `<${String(key)}>`,
});

function build(code: ErrorCode) {
  return (apiError as (c: ErrorCode, p: unknown) => ReturnType<
    typeof apiError
  >)(code, ANY_PARAMS);
}

Deno.test("every catalogue entry builds an error with its own code, a 4xx/5xx status, a message and its Retry-After rule", () => {
  for (const code of CODES) {
    const spec = ERRORS[code];
    const e = build(code);
    assert.equal(e.code, code);
    assert.equal(e.status, spec.status === "given" ? 502 : spec.status, code);
    assert.ok(e.status >= 400 && e.status <= 599, code);
    assert.ok(e.message.length > 0 && !e.message.includes("undefined"), code);
    const rule = spec.retryAfter as number | string;
    const expected = typeof rule === "number"
      ? rule
      : rule === "none"
      ? undefined
      : 7;
    assert.equal(e.retryAfterSecs, expected, code);
    for (const shape of ["openai", "anthropic"] as const) {
      const body = JSON.parse(routeErrorBody(shape, e));
      const inner = shape === "openai" ? body.error : body.error;
      assert.equal(inner.code, code);
      assert.equal(inner.type, errorType(shape, e.status));
    }
  }
});

Deno.test("a 503 or 429 always says when to come back; nothing else guesses", () => {
  for (const code of CODES) {
    const { status, retryAfter } = ERRORS[code];
    if (status === 429) assert.notEqual(retryAfter, "none", code);
    if (retryAfter !== "none") {
      assert.ok(status === 503 || status === 429, code);
    }
  }
});

Deno.test("error types by status, one table for both shapes as the two APIs document them", () => {
  const statuses = [400, 401, 403, 404, 413, 429, 500, 502, 503, 504];
  assert.deepEqual(statuses.map((s) => errorType("openai", s)), [
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "invalid_request_error",
    "invalid_request_error",
    "rate_limit_error",
    "server_error",
    "server_error",
    "server_error",
    "server_error",
  ]);
  assert.deepEqual(statuses.map((s) => errorType("anthropic", s)), [
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "not_found_error",
    "request_too_large",
    "rate_limit_error",
    "api_error",
    "api_error",
    "overloaded_error",
    "timeout_error",
  ]);
});

Deno.test("C120 a 404 has one type per shape, whichever route family wrote it", () => {
  const notFound = CODES.filter((c) => ERRORS[c].status === 404);
  // Every family: the core's model refusal, /v1/models/{id}, /admin/*, lifecycle.
  for (
    const c of [
      "model_not_found",
      "not_found",
      "worker_not_found",
      "key_not_found",
      "task_not_found",
    ]
  ) {
    assert.ok(notFound.includes(c as ErrorCode), c);
  }
  assert.ok(notFound.length >= 5);
  for (const shape of ["openai", "anthropic"] as const) {
    const types = new Set(
      notFound.map((c) =>
        JSON.parse(routeErrorBody(shape, build(c))).error.type
      ),
    );
    assert.deepEqual(
      [...types],
      [shape === "openai" ? "invalid_request_error" : "not_found_error"],
    );
  }
});

Deno.test("the one shutting_down and the one answer-too-large message", () => {
  const a = apiError("shutting_down", { retryAfterSecs: 3 });
  assert.deepEqual(a, {
    status: 503,
    code: "shutting_down",
    message: "server is shutting down; retry shortly",
    retryAfterSecs: 3,
  });
  const limit = { limit: 40, unit: "characters", of: "in a stream" } as const;
  assert.equal(
    apiError("stream_too_large", limit).message,
    apiError("response_too_large", limit).message,
  );
});
