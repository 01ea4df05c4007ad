import assert from "node:assert/strict";
import { errorShapeOf, routeErrorBody } from "./error_body.ts";

Deno.test("the route's error shape: Anthropic's under /v1/messages, OpenAI's elsewhere and when unknown", () => {
  assert.equal(errorShapeOf("/v1/messages"), "anthropic");
  assert.equal(errorShapeOf("/v1/messages/count_tokens?beta=1"), "anthropic");
  assert.equal(errorShapeOf("/v1/chat/completions"), "openai");
  assert.equal(errorShapeOf("/v1/embeddings"), "openai");
  assert.equal(errorShapeOf(null), "openai");
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
