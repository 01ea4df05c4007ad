// Issue 25's streamed answers that are not server-sent events (stream-head-v1,
// C108), with real processes: the server and our worker as `deno run`
// children in front of a raw TCP backend (e2e/_raw_backend.ts) that streams
// NDJSON as Ollama's native API does, or chunked audio bytes. The client gets
// the backend's status, content type and exact bytes, as they come; a worker
// of the original dialect still gets the relay's SSE head.
import assert from "node:assert/strict";
import type net from "node:net";
import { Buffer } from "node:buffer";
import { httpChunk, rawBackend, type RawRequest } from "./_raw_backend.ts";
import { SECRET, startServer, startWorker, withChildren } from "./_faults.ts";
import { startOriginalWorker } from "./_original_worker.ts";
import { waitUntil } from "../shell/procs.ts";
import { workersConnected } from "../shell/demo/relay_probes.ts";

const MODEL = "raw-model";

const NDJSON_LINES = [
  '{"model":"raw-model","message":{"role":"assistant","content":"H\u00e9"},"done":false}\n',
  '{"model":"raw-model","message":{"role":"assistant","content":"llo"},"done":false}\n',
  '{"model":"raw-model","done":true,"eval_count":2}\n',
];

/** 48 KiB that is not UTF-8, as an MP3 stream's bytes would be. */
const AUDIO = (() => {
  const out = Buffer.alloc(48 * 1024);
  for (let i = 0; i < out.length; i++) out[i] = (i * 131 + 0xc3) & 0xff;
  out[0] = 0xff;
  return out;
})();

function head(contentType: string): string {
  return `HTTP/1.1 200 OK\r\ncontent-type: ${contentType}\r\nx-backend: raw\r\ntransfer-encoding: chunked\r\n\r\n`;
}

function binaryChunk(bytes: Buffer): Buffer {
  return Buffer.concat([
    Buffer.from(`${bytes.length.toString(16)}\r\n`),
    bytes,
    Buffer.from("\r\n"),
  ]);
}

/**
 * The backend: /api/chat streams NDJSON, its last line only once `release`
 * is called (so a test can prove the first line reached the client before);
 * /v1/audio/speech streams AUDIO in three chunks; /api/broken sends one line
 * and resets the connection.
 */
function answer(release: Promise<void>) {
  return (socket: net.Socket, r: RawRequest) => {
    if (r.path === "/api/chat") {
      socket.write(head("application/x-ndjson") + httpChunk(NDJSON_LINES[0]!));
      // The second line split inside a character's neighbourhood, two writes.
      setTimeout(
        () => socket.write(httpChunk(NDJSON_LINES[1]!.slice(0, 30))),
        20,
      );
      setTimeout(() => socket.write(httpChunk(NDJSON_LINES[1]!.slice(30))), 40);
      // The last line after the second, and only once released.
      Promise.all([release, new Promise((r) => setTimeout(r, 60))]).then(() =>
        socket.write(httpChunk(NDJSON_LINES[2]!) + "0\r\n\r\n")
      );
    } else if (r.path === "/v1/audio/speech") {
      socket.write(head("audio/mpeg"));
      const third = AUDIO.length / 3;
      socket.write(binaryChunk(AUDIO.subarray(0, third)));
      setTimeout(
        () => socket.write(binaryChunk(AUDIO.subarray(third, 2 * third))),
        20,
      );
      setTimeout(() => {
        socket.write(binaryChunk(AUDIO.subarray(2 * third)));
        socket.write("0\r\n\r\n");
      }, 40);
    } else if (r.path === "/api/broken") {
      socket.write(head("application/x-ndjson") + httpChunk(NDJSON_LINES[0]!));
      setTimeout(() => socket.resetAndDestroy(), 100);
    } else {
      socket.end("HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
    }
  };
}

function post(url: string, path: string, body: Record<string, unknown>) {
  return fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, stream: true, ...body }),
  });
}

/** Reads a response body to its end, or to its failure: the bytes and whether it failed. */
async function readAll(
  res: Response,
  onFirst?: () => void,
): Promise<{ bytes: Buffer; failed: boolean }> {
  const parts: Uint8Array[] = [];
  const reader = res.body!.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (parts.length === 0) onFirst?.();
      parts.push(value);
    }
    return { bytes: Buffer.concat(parts), failed: false };
  } catch {
    return { bytes: Buffer.concat(parts), failed: true };
  }
}

Deno.test("issue 25 (C108): a streamed NDJSON and a chunked audio answer reach the client through our worker with the backend's head and exact bytes", async () => {
  let release: () => void = () => {};
  const released = new Promise<void>((r) => release = r);
  const backend = await rawBackend(answer(released), [MODEL]);
  try {
    await withChildren(async (started) => {
      const url = await startServer(started, {
        FORWARD_PATH_PREFIXES: "/api/",
      });
      await startWorker(started, "ours", url, backend.url);
      await waitUntil(
        "worker registered",
        async () => (await workersConnected(url)) === 1,
      );

      // NDJSON (Ollama's native /api/chat): the first line reaches the client
      // while the backend still holds the last one back.
      const res = await post(url, "/api/chat", { messages: [] });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("content-type"), "application/x-ndjson");
      assert.equal(res.headers.get("x-backend"), "raw");
      assert.ok(res.headers.has("x-queue-wait-ms"), "spec 004 header kept");
      const got = await readAll(res, release);
      assert.equal(got.failed, false);
      assert.equal(got.bytes.toString("utf8"), NDJSON_LINES.join(""));

      // Chunked audio that is not UTF-8: the very bytes, labelled audio/mpeg.
      const audio = await post(url, "/v1/audio/speech", {
        input: "hello",
        voice: "alloy",
      });
      assert.equal(audio.status, 200);
      assert.equal(audio.headers.get("content-type"), "audio/mpeg");
      const bytes = await readAll(audio);
      assert.equal(bytes.failed, false);
      assert.equal(bytes.bytes.length, AUDIO.length);
      assert.ok(bytes.bytes.equals(AUDIO), "identical bytes");

      // Broken mid-stream: the connection is cut; no SSE error event is
      // glued onto the NDJSON.
      const broken = await post(url, "/api/broken", {});
      assert.equal(broken.headers.get("content-type"), "application/x-ndjson");
      const cut = await readAll(broken);
      assert.equal(cut.failed, true);
      assert.equal(cut.bytes.toString("utf8"), NDJSON_LINES[0]);
    });
  } finally {
    await backend.close();
  }
});

Deno.test("issue 25 (C108): a worker of the original dialect streams as before, under the relay's SSE head", async () => {
  const backend = await rawBackend(answer(Promise.resolve()), [MODEL]);
  try {
    await withChildren(async (started) => {
      const url = await startServer(started, {
        FORWARD_PATH_PREFIXES: "/api/",
      });
      const original = startOriginalWorker({
        serverUrl: url,
        secret: SECRET,
        backendUrl: backend.url,
        models: [MODEL],
      });
      try {
        const ack = await original.ack;
        assert.equal("extensions" in ack, false);
        const res = await post(url, "/api/chat", { messages: [] });
        assert.equal(res.status, 200);
        assert.equal(
          res.headers.get("content-type"),
          "text/event-stream; charset=utf-8",
        );
        assert.equal(res.headers.get("x-backend"), null);
        assert.equal(await res.text(), NDJSON_LINES.join(""));
      } finally {
        await original.close();
      }
    });
  } finally {
    await backend.close();
  }
});
