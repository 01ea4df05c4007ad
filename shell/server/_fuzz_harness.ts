// Test-only: the relay under fuzz (issue 15). One relay per property, with its
// admin API on, a worker answering model m1, and a legit client stream running
// alongside on its own worker: the fuzz must not add or remove a byte of it.
// Every log line at level error is kept: the relay must not log one.
import assert from "node:assert/strict";
import type { LogFields, Logger, LogLevel } from "../log.ts";
import {
  ADMIN_TOKEN,
  autoRespond,
  type TestRelay,
} from "./_relay_test_helpers.ts";
import {
  chatBody,
  connectWorker,
  registeredWorker,
  testConfig,
  type TestWorker,
} from "./_test_helpers.ts";
import { startRelay } from "./relay.ts";

export const FUZZ_MAX_BODY = 16 * 1024;

export type FuzzRelay = {
  relay: TestRelay;
  errors: string[];
  /** Live request ids a fake worker may name (the legit stream's). */
  ids(): string[];
  /**
   * One more chunk on the legit stream, and a check that the client has
   * received exactly the chunks sent so far, no more, no less.
   */
  step(): Promise<void>;
  /** Ends the legit stream and checks it, /health, a normal request, the log. */
  finish(): Promise<void>;
  close(): Promise<void>;
};

export async function startFuzzRelay(): Promise<FuzzRelay> {
  const errors: string[] = [];
  const log: Logger = (
    level: LogLevel,
    message: string,
    fields?: LogFields,
  ) => {
    if (level === "error") errors.push(`${message} ${JSON.stringify(fields)}`);
  };
  const config = testConfig({ registerTimeoutMs: 2000 }, {
    adminToken: ADMIN_TOKEN,
    maxBodyBytes: FUZZ_MAX_BODY,
    bodyTimeoutMs: 2000,
    logLevel: "error",
  });
  const started = await startRelay(config, log);
  const base = `127.0.0.1:${started.port}`;
  const relay: TestRelay = {
    ...started,
    url: `http://${base}`,
    wsUrl: `ws://${base}/v1/worker/connect`,
  };
  const helper = await registeredWorker(relay, {
    models: ["m1"],
    max_concurrent: 64,
  });
  const stopHelper = autoRespond(helper);
  answerPings(helper);
  // The stream worker serves only the legit stream; anything else it is sent
  // (a fuzz request for its model) is answered at once.
  const streamer = await connectWorker(relay);
  streamer.send({
    type: "register",
    worker_name: "streamer",
    models: ["legit-stream"],
    max_concurrent: 64,
  });
  await streamer.next("register_ack");
  answerPings(streamer);
  const responding = fetch(`${relay.url}/v1/chat/completions`, {
    method: "POST",
    body: chatBody("legit-stream", true),
  });
  const legit = await streamer.next("request");
  answerOthers(streamer, legit.request_id as string);
  // The stream's head leaves with its first chunk.
  let expected = 'data: {"n":"first"}\n\n';
  streamer.send({
    type: "response_chunk",
    request_id: legit.request_id,
    chunk: expected,
  });
  const response = await responding;
  const reader = response.body!.pipeThrough(new TextDecoderStream());
  let received = "";
  let failed: unknown = null;
  // Woken by every arrival, so a step costs one round trip, not a poll period.
  let wake = () => {};
  const reading = reader.pipeTo(
    new WritableStream({
      write: (t) => {
        received += t;
        wake();
      },
    }),
  ).catch((e) => {
    failed = e;
    wake();
  });
  const arrived = (length: number) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        const state = relay.runtime.state.requests.get(
          legit.request_id as string,
        );
        reject(
          new Error(
            `the legit stream's latest chunk never came: ${received.length}/${length} bytes, request ${
              JSON.stringify(state?.status ?? "gone")
            }, tail ${JSON.stringify(received.slice(-200))}`,
          ),
        );
      }, 2000);
      wake = () => {
        if (received.length < length && failed === null) return;
        clearTimeout(timer);
        resolve();
      };
      wake();
    });
  let n = 0;
  return {
    relay,
    errors,
    ids: () => [
      legit.request_id as string,
      "req-0",
      helper.ack.worker_id as string,
    ],
    async step() {
      const chunk = `data: {"n":${n++}}\n\n`;
      expected += chunk;
      streamer.send({
        type: "response_chunk",
        request_id: legit.request_id,
        chunk,
      });
      await arrived(expected.length);
      assert.equal(failed, null, "the legit stream broke");
      assert.equal(received, expected, "the legit stream gained or lost bytes");
    },
    async finish() {
      streamer.send({
        type: "response_complete",
        request_id: legit.request_id,
        status_code: 200,
      });
      await reading;
      assert.equal(failed, null, "the legit stream broke");
      assert.equal(response.status, 200);
      assert.equal(received, expected, "the legit stream gained or lost bytes");
      const health = await fetch(`${relay.url}/health`);
      assert.equal(health.status, 200, await health.text());
      const normal = await fetch(`${relay.url}/v1/chat/completions`, {
        method: "POST",
        body: chatBody("m1"),
      });
      assert.equal(normal.status, 200, await normal.text());
      assert.deepEqual(errors, []);
      stopHelper();
    },
    async close() {
      await helper.close().catch(() => {});
      await streamer.close().catch(() => {});
      await relay.close();
    },
  };
}

/** Answers pings, so long runs outlive HEARTBEAT_TIMEOUT_SECS. */
function answerPings(w: TestWorker): void {
  w.ws.addEventListener("message", (e) => {
    const f = JSON.parse(e.data as string);
    if (f.type === "ping") w.send({ type: "pong", current_load: 0 });
  });
}

function answerOthers(w: TestWorker, keep: string): void {
  w.ws.addEventListener("message", (e) => {
    const f = JSON.parse(e.data as string);
    if (f.type !== "request" || f.request_id === keep) return;
    w.complete(f, 200, "{}");
  });
}
