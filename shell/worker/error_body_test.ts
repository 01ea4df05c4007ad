// Issue 27: one error body for a client, whichever layer writes it. The same
// 502 from the server (shell/server/http/errors.ts), the worker core
// (core/worker/answers.ts, worker_actions.ts) and the worker shell
// (shell/worker/answer_readers.ts) is the same bytes, in both route shapes.
import assert from "node:assert/strict";
import type { ClientApi } from "../../core/mod.ts";
import type { RequestMessage } from "../../core/protocol/mod.ts";
import { completionFrames, notAnsweredMessage } from "../../core/worker/mod.ts";
import { registered } from "../../core/worker/_testing.ts";
import { errorBody } from "../server/http/errors.ts";
import { protocolErrorAnswer } from "./answer_readers.ts";

const ROUTES: [string, ClientApi][] = [
  ["/v1/chat/completions", "openai"],
  ["/v1/messages", "anthropic"],
];

function server(api: ClientApi, code: string, message: string): string {
  return errorBody(api, { status: 502, code, message });
}

function bodyOf(m: unknown): string {
  const f = m as { type: string; body?: string };
  assert.equal(f.type, "response_complete");
  return f.body ?? "";
}

Deno.test("the worker core's 502 for an original server is the server's 502, in both route shapes", () => {
  // The original server reads no scoped error: the worker answers for it.
  const state = registered();
  for (const [path, api] of ROUTES) {
    const m = notAnsweredMessage(
      state,
      "r1",
      path,
      "backend_stream_broken",
      "the backend broke",
    );
    assert.equal(bodyOf(m), server(api, "backend_error", "the backend broke"));
  }
});

Deno.test("the worker core's 502 response_too_large is the server's 502, in both route shapes", () => {
  const state = registered({ responseFrameBytesMax: 2_000 });
  for (const [path, api] of ROUTES) {
    const [m] = completionFrames(state, "r1", path, {
      status_code: 200,
      headers: {},
      body: "x".repeat(10_000),
      token_counts: null,
    });
    const body = bodyOf(m);
    const message = JSON.parse(body).error.message as string;
    assert.equal(body, server(api, "response_too_large", message));
  }
});

Deno.test("the worker shell's 502 is the server's 502, in both route shapes", () => {
  for (const [path, api] of ROUTES) {
    const request = { endpoint_path: path } as RequestMessage;
    const c = protocolErrorAnswer(request, "bad status line");
    assert.equal(c.status_code, 502);
    assert.equal(
      c.body,
      server(
        api,
        "backend_protocol_error",
        "the backend's answer is not valid HTTP/1.1: bad status line",
      ),
    );
  }
});

Deno.test("the one 502 reads as each API documents it: OpenAI server_error, Anthropic api_error, the relay's code in both", () => {
  assert.equal(
    server("openai", "backend_error", "m"),
    '{"error":{"message":"m","type":"server_error","code":"backend_error"}}',
  );
  assert.equal(
    server("anthropic", "backend_error", "m"),
    '{"type":"error","error":{"type":"api_error","message":"m","code":"backend_error"}}',
  );
});
