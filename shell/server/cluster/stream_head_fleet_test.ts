// `deno task test:cluster`, issue 25 (C108): a streamed answer that is not
// server-sent events keeps the backend's head when the client and the worker
// are on two instances: the head travels through the log (a `headReceived`
// event every replica applies) ahead of the stream's commit, so the client's
// instance opens the response with it; the bytes go direct as any stream's.
import assert from "node:assert/strict";
import type net from "node:net";
import { httpChunk, rawBackend } from "../../../e2e/_raw_backend.ts";
import { MODEL, withHolderAndClient } from "./_fleet.ts";

const LINES = [
  '{"message":{"content":"H\u00e9"},"done":false}\n',
  '{"message":{"content":"llo"},"done":false}\n',
  '{"done":true}\n',
];

function ndjson(socket: net.Socket): void {
  socket.write(
    "HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n" +
      httpChunk(LINES[0]!),
  );
  setTimeout(() => socket.write(httpChunk(LINES[1]!)), 30);
  setTimeout(() => socket.write(httpChunk(LINES[2]!) + "0\r\n\r\n"), 60);
}

Deno.test("cluster: a streamed NDJSON answer reaches a client on another instance than its worker with the backend's content type and exact bytes", async () => {
  const backend = await rawBackend(ndjson, [MODEL]);
  try {
    await withHolderAndClient("head-w1", backend.url, {
      FORWARD_PATH_PREFIXES: "/api/",
    }, async ({ holder, client }) => {
      for (const at of [client, holder]) {
        const res = await fetch(`${at.url}/api/chat`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: MODEL, stream: true, messages: [] }),
        });
        assert.equal(res.status, 200);
        assert.equal(res.headers.get("content-type"), "application/x-ndjson");
        assert.equal(await res.text(), LINES.join(""));
      }
    });
  } finally {
    await backend.close();
  }
});
