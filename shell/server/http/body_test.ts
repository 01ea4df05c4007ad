// Slow and greedy clients (issue 15): every body reader answers 408 or 413 in its
// route's error shape and closes the connection. Raw sockets on loopback.
import assert from "node:assert/strict";
import { ADMIN_TOKEN, withTestRelay } from "../_relay_test_helpers.ts";
import { rawConnect, until } from "../_raw_socket.ts";
import {
  chatBody,
  postChat,
  registeredWorker,
  startTestServer,
  testConfig,
  withTestServer,
} from "../_test_helpers.ts";

function post(
  path: string,
  contentLength: number,
  headers: Record<string, string> = {},
): string {
  return [
    `POST ${path} HTTP/1.1`,
    "Host: 127.0.0.1",
    "Content-Type: application/json",
    `Content-Length: ${contentLength}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ].join("\r\n") + "\r\n\r\n";
}

/** The status line and JSON body of the one answer, once the server closed. */
async function answerThenClose(
  port: number,
  request: string,
  bodyPart = "",
): Promise<{ status: number; head: string; body: unknown; ms: number }> {
  const c = await rawConnect(port);
  try {
    await c.write(request + bodyPart);
    const ms = await c.ended;
    const text = c.received();
    const [head, rest] = text.split("\r\n\r\n") as [string, string];
    // Chunked or not, the JSON is the part between the first { and last }.
    const json = rest.slice(rest.indexOf("{"), rest.lastIndexOf("}") + 1);
    return {
      status: Number(head.split(" ")[1]),
      head: head.toLowerCase(),
      body: JSON.parse(json),
      ms,
    };
  } finally {
    c.close();
  }
}

Deno.test("issue 15 a body still incomplete after BODY_TIMEOUT_SECS gets 408 in the route's shape and the connection is closed", async () => {
  const server = await startTestServer(
    testConfig({}, { bodyTimeoutMs: 300 }),
  );
  try {
    const openai = await answerThenClose(
      server.port,
      post("/v1/chat/completions", 100),
      '{"mo',
    );
    assert.equal(openai.status, 408);
    assert.match(openai.head, /connection: close/);
    assert.deepEqual(
      (openai.body as { error: { code: string } }).error.code,
      "body_timeout",
    );
    assert.ok(openai.ms >= 250 && openai.ms < 3000, `${openai.ms} ms`);
    const anthropic = await answerThenClose(
      server.port,
      post("/v1/messages", 100),
      '{"mo',
    );
    assert.equal(anthropic.status, 408);
    assert.equal((anthropic.body as { type: string }).type, "error");
    // The server still serves everyone else.
    const w = await registeredWorker(server);
    const pending = postChat(server, chatBody());
    w.complete(await w.next("request"), 200, "{}");
    assert.equal((await pending).status, 200);
    await (await pending).body?.cancel();
    await w.close();
  } finally {
    await server.close();
  }
});

Deno.test("issue 15 an oversized body gets 413 and the connection is closed, on client, admin and lifecycle routes", async () => {
  await withTestRelay(
    testConfig({}, { adminToken: ADMIN_TOKEN, maxBodyBytes: 1024 }),
    async (relay) => {
      const cases: [string, number, Record<string, string>][] = [
        ["/v1/chat/completions", 1025, {}],
        ["/admin/keys", 16 * 1024 + 1, {
          authorization: `Bearer ${ADMIN_TOKEN}`,
        }],
        ["/v1/models/load", 64 * 1024 + 1, {}],
      ];
      for (const [path, size, headers] of cases) {
        // Declared too large: refused before a byte of it is read.
        const declared = await answerThenClose(
          relay.port,
          post(path, size, headers),
        );
        assert.equal(declared.status, 413, path);
        assert.match(declared.head, /connection: close/, path);
        assert.equal(
          (declared.body as { error: { code: string } }).error.code,
          "body_too_large",
          path,
        );
        // Chunked, no length: refused as soon as the limit is passed, not read on.
        const c = await rawConnect(relay.port);
        try {
          await c.write(
            [
              `POST ${path} HTTP/1.1`,
              "Host: 127.0.0.1",
              "Transfer-Encoding: chunked",
              ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
            ].join("\r\n") + "\r\n\r\n",
          );
          const chunk = "x".repeat(4096);
          for (let sent = 0; sent <= size; sent += chunk.length) {
            await c.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
          }
          // The last chunk is never sent: only the limit can end this request.
          await until(c, (r) => r.includes("}"));
          assert.match(c.received(), /^HTTP\/1\.1 413/, path);
          await c.ended;
        } finally {
          c.close();
        }
      }
    },
  );
});

Deno.test("issue 15 a route that answers without reading the body closes the connection if the body never completes", async () => {
  await withTestServer(testConfig(), async (server) => {
    for (const path of ["/nowhere", "/health"]) {
      const c = await rawConnect(server.port);
      try {
        await c.write(post(path, 100_000) + "x".repeat(10));
        // The client never sends the rest, and never closes.
        const ms = await c.ended;
        assert.ok(ms < 3000, `${path}: closed after ${ms} ms`);
        assert.match(c.received(), /^HTTP\/1\.1 (404|503)/, path);
      } finally {
        c.close();
      }
    }
  });
});
