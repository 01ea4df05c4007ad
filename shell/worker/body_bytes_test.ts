// body-bytes-v1 and the request's method in the worker (issue 25): bodies that
// are not text reach the backend and come back as the very bytes, through
// both HTTP clients' paths (the worker's own for http:).
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { SPEECH_BYTES } from "../../mock/endpoints.ts";
import type { RequestMessage } from "../../core/protocol/mod.ts";
import type { Completion } from "../../core/worker/mod.ts";
import {
  type AnswerSink,
  type BackendOutcome,
  forwardToBackend,
} from "./backend_client.ts";
import { withMockBackend } from "../../mock/_with_backend.ts";

const at = (url: string) => ({ url, apiKey: null });

/** Bytes that are not UTF-8 (0xff never is). */
const BINARY = new Uint8Array(70_000).map((_, i) => (i * 37 + 0xff) & 0xff);

function frame(over: Partial<RequestMessage>): RequestMessage {
  return {
    type: "request",
    request_id: "r1",
    model: "mock-model",
    endpoint_path: "/v1/mock/echo",
    is_streaming: false,
    body: "",
    headers: { "content-type": "application/octet-stream" },
    ...over,
  };
}

function sink(chunks: Uint8Array[], over: Partial<AnswerSink> = {}) {
  return {
    chunk: (c: string | Uint8Array) =>
      chunks.push(typeof c === "string" ? new TextEncoder().encode(c) : c),
    bodyChunks: true,
    chunkBytes: true,
    bodyBytes: true,
    hasRoom: () => true,
    ...over,
  };
}

function completed(o: BackendOutcome): Completion {
  assert.equal(o.kind, "completed", JSON.stringify(o).slice(0, 300));
  return (o as Extract<BackendOutcome, { kind: "completed" }>).completion;
}

Deno.test("body-bytes-v1: a request body that is not UTF-8 reaches the backend, and its answer comes back, byte for byte", async () => {
  await withMockBackend({}, async (backend) => {
    const o = await forwardToBackend(
      at(backend.url),
      frame({
        method: "PUT",
        body_base64: Buffer.from(BINARY).toString("base64"),
      }),
      new AbortController().signal,
      sink([]),
    );
    const c = completed(o);
    assert.equal(c.status_code, 200);
    assert.equal(c.headers["x-mock-method"], "PUT");
    assert.equal(c.body, "");
    assert.deepEqual(
      new Uint8Array(Buffer.from(c.body_base64!, "base64")),
      BINARY,
    );
  });
});

Deno.test("body-bytes-v1: audio that is not UTF-8 comes back as base64 with its content type; without the extension it is decoded as text, as before", async () => {
  await withMockBackend({}, async (backend) => {
    const req = frame({
      endpoint_path: "/v1/audio/speech",
      body: '{"model":"tts-1","input":"hi","voice":"alloy"}',
      headers: { "content-type": "application/json" },
    });
    const c = completed(
      await forwardToBackend(
        at(backend.url),
        req,
        new AbortController().signal,
        sink([]),
      ),
    );
    assert.equal(c.headers["content-type"], "audio/mpeg");
    assert.deepEqual(
      new Uint8Array(Buffer.from(c.body_base64!, "base64")),
      SPEECH_BYTES,
    );
    const old = completed(
      await forwardToBackend(
        at(backend.url),
        req,
        new AbortController().signal,
        sink([], { bodyBytes: false }),
      ),
    );
    assert.equal(old.body_base64, undefined);
    assert.ok(old.body.includes("\ufffd"));
  });
});

Deno.test("body-bytes-v1: a streamed binary answer passes its bytes untouched (no UTF-8 repair)", async () => {
  await withMockBackend({}, async (backend) => {
    const chunks: Uint8Array[] = [];
    const c = completed(
      await forwardToBackend(
        at(backend.url),
        frame({
          is_streaming: true,
          body_base64: Buffer.from(BINARY).toString("base64"),
        }),
        new AbortController().signal,
        sink(chunks),
      ),
    );
    assert.equal(c.status_code, 200);
    assert.deepEqual(new Uint8Array(Buffer.concat(chunks)), BINARY);
  });
});

Deno.test("a GET request frame is sent as GET with no body", async () => {
  await withMockBackend({}, async (backend) => {
    const c = completed(
      await forwardToBackend(
        at(backend.url),
        frame({ method: "GET", headers: {} }),
        new AbortController().signal,
        sink([]),
      ),
    );
    assert.equal(c.status_code, 200);
    assert.equal(c.headers["x-mock-method"], "GET");
    assert.equal(c.body, "");
  });
});
