// The worker's own per-request and per-chunk work on its backend path (issue
// 31), each piece alone: what `bench:e2e` cannot resolve on a shared machine
// (a µs in a worker's ~100 µs a plain request). `deno bench bench/worker_bench.ts`.
import assert from "node:assert/strict";
import { setTimeout } from "node:timers";
import {
  feed,
  newResponseParser,
} from "../shell/worker/http1/response_parser.ts";
import { makeDeadlines } from "../shell/worker/deadlines.ts";
import { bodyFitsOneFrame } from "../core/protocol/frame_limit.ts";

const NO_EVENTS = { head() {}, body() {}, complete() {} };

/** A plain answer as the mock (Deno.serve) sends it, head and body in one read. */
const PLAIN = Buffer.from(
  "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nvary: Accept-Encoding\r\n" +
    "content-length: 300\r\ndate: Fri, 27 Nov 2026 20:37:58 GMT\r\n\r\n" +
    "x".repeat(300),
);

/** 20 SSE events of a chunked stream in one read, after its head. */
const EVENTS = (() => {
  const event =
    'data: {"id":"c-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok "}}]}\n\n';
  const chunk = `${event.length.toString(16)}\r\n${event}\r\n`;
  return chunk.repeat(20);
})();
const STREAM_HEAD =
  "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

Deno.bench("parse a plain answer, head and 300-byte body in one read", () => {
  feed(newResponseParser(), PLAIN, NO_EVENTS);
});

Deno.bench(
  "parse 20 SSE events of a chunked stream in one read",
  (b) => {
    const p = newResponseParser();
    feed(p, Buffer.from(STREAM_HEAD, "latin1"), NO_EVENTS);
    let bytes = 0;
    const events = { ...NO_EVENTS, body: (s: Buffer) => bytes += s.length };
    // A fresh read each time: the parser moves a read's chunk data together.
    const reads = Array.from({ length: 64 }, () => Buffer.from(EVENTS));
    b.start();
    for (const read of reads) feed(p, read, events);
    b.end();
    assert.ok(bytes > 0);
  },
);

const HEADERS = { "content-type": "application/json", "x-request-id": "r-1" };
const BODY = JSON.stringify({
  choices: [{ message: { content: "é".repeat(500) } }],
});

Deno.bench("frame fit of a 1 KB answer", () => {
  bodyFitsOneFrame(BODY, HEADERS, "req-0123456789", 16 * 1024 * 1024);
});

const never = () => assert.fail("a head timeout fired");

Deno.bench(
  "head timeout: setTimeout and clearTimeout",
  { group: "timeout" },
  () => {
    clearTimeout(setTimeout(never, 300_000));
  },
);

const DEADLINES = makeDeadlines();
Deno.bench("head timeout: deadlines add and cancel", {
  group: "timeout",
  baseline: true,
}, () => {
  DEADLINES.cancel(DEADLINES.add(300_000, never));
});
