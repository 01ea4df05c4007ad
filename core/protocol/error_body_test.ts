import assert from "node:assert/strict";
import {
  anthropicErrorType,
  errorShapeOf,
  openAiErrorType,
  routeErrorBody,
} from "./error_body.ts";

Deno.test("the route's error shape: Anthropic's under /v1/messages, OpenAI's elsewhere and when unknown", () => {
  assert.equal(errorShapeOf("/v1/messages"), "anthropic");
  assert.equal(errorShapeOf("/v1/messages/count_tokens?beta=1"), "anthropic");
  assert.equal(errorShapeOf("/v1/chat/completions"), "openai");
  assert.equal(errorShapeOf("/v1/embeddings"), "openai");
  assert.equal(errorShapeOf(null), "openai");
});

Deno.test("error types by status, as the two APIs document them", () => {
  const statuses = [400, 401, 403, 404, 413, 429, 500, 502, 503, 504];
  assert.deepEqual(statuses.map(openAiErrorType), [
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
  assert.deepEqual(statuses.map(anthropicErrorType), [
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

Deno.test("details go inside the error object, after the code", () => {
  assert.equal(
    routeErrorBody("openai", {
      status: 429,
      code: "rate_limited",
      message: "slow down",
      details: { limit: 10, remaining: 0 },
    }),
    '{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limited","limit":10,"remaining":0}}',
  );
});
