import assert from "node:assert/strict";
import parsePrometheus from "parse-prometheus-text-format";
import {
  admin,
  ADMIN_TOKEN,
  autoRespond,
  type TestRelay,
  withTestRelay,
} from "../_relay_test_helpers.ts";
import {
  chatBody,
  connectWorker,
  registeredWorker,
  testConfig,
  waitFor,
} from "../_test_helpers.ts";
import { Histogram } from "./metrics.ts";

type Sample = {
  value?: string;
  labels?: Record<string, string>;
  buckets?: Record<string, string>;
  count?: string;
  sum?: string;
};
type Family = { name: string; help: string; type: string; metrics: Sample[] };

/** The exposition text, checked line by line, then parsed by the npm parser. */
async function scrape(relay: TestRelay): Promise<Map<string, Family>> {
  const res = await fetch(`${relay.url}/metrics`);
  assert.equal(res.status, 200);
  assert.match(
    res.headers.get("content-type") ?? "",
    /^text\/plain; version=0\.0\.4/,
  );
  const text = await res.text();
  assert.ok(text.endsWith("\n"));
  const typed = new Map<string, string>();
  for (const line of text.trimEnd().split("\n")) {
    const type = /^# TYPE (\S+) (counter|gauge|histogram)$/.exec(line);
    if (type !== null) {
      typed.set(type[1]!, type[2]!);
      continue;
    }
    if (line.startsWith("# HELP ")) continue;
    const m =
      /^([a-z_:][a-z0-9_:]*)(\{(?:[a-z_]+="(?:[^"\\]|\\.)*",?)*\})? (-?[0-9.e+]+|\+Inf|NaN)$/
        .exec(line);
    assert.ok(m !== null, `malformed sample line: ${line}`);
    const family = m[1]!.replace(/_(bucket|sum|count)$/, "");
    assert.ok(
      typed.has(m[1]!) || typed.get(family) === "histogram",
      `sample before its TYPE: ${line}`,
    );
  }
  for (const [name, type] of typed) {
    assert.match(name, /^modelrelay_/);
    if (type === "counter") assert.match(name, /_total$/);
    if (type === "histogram") assert.match(name, /_seconds$/);
  }
  const families = parsePrometheus(text) as Family[];
  return new Map(families.map((f) => [f.name, f]));
}

function value(
  m: Map<string, Family>,
  name: string,
  labels: Record<string, string> = {},
): number {
  const f = m.get(name);
  assert.ok(f !== undefined, `missing family ${name}`);
  const s = f.metrics.find((x) =>
    Object.entries(labels).every(([k, v]) => x.labels?.[k] === v)
  );
  return s === undefined ? 0 : Number(s.value ?? s.count);
}

function post(relay: TestRelay, stream: boolean) {
  return fetch(`${relay.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: chatBody("m1", stream),
  });
}

Deno.test("/metrics parses as Prometheus text and its counters move when requests flow", async () => {
  await withTestRelay(
    testConfig({ queueLenMax: 0 }, { adminToken: ADMIN_TOKEN }),
    async (relay) => {
      const before = await scrape(relay);
      assert.equal(value(before, "modelrelay_workers_connected"), 0);
      assert.equal(value(before, "modelrelay_request_duration_seconds"), 0);
      for (
        const name of [
          "modelrelay_requests_total",
          "modelrelay_queue_depth",
          "modelrelay_in_flight_requests",
          "modelrelay_stream_chunks_total",
          "modelrelay_stream_bytes_total",
          "modelrelay_time_to_first_byte_seconds",
          "modelrelay_requeues_total",
          "modelrelay_cancels_total",
          "modelrelay_auth_failures_total",
        ]
      ) assert.ok(before.has(name), name);
      assert.equal(
        value(before, "modelrelay_queue_depth", { provider: "local" }),
        0,
      );

      const w = await registeredWorker(relay, { max_concurrent: 1 });
      const stop = autoRespond(w);
      for (const stream of [false, true, true]) {
        const res = await post(relay, stream);
        assert.equal(res.status, 200);
        await res.text();
      }
      stop();
      // Mark the answered request frames as taken.
      for (let i = 0; i < 3; i++) await w.next("request");

      // One in flight (the worker holds it), one rejected: no model, no queue.
      const held = post(relay, false);
      const req = await w.next("request");
      const mid = await scrape(relay);
      assert.equal(value(mid, "modelrelay_in_flight_requests"), 1);
      assert.equal(value(mid, "modelrelay_workers_connected"), 1);
      const full = await post(relay, false);
      assert.equal(full.status, 503);
      await full.body?.cancel();
      w.complete(req, 200, "{}");
      await (await held).text();

      // A client that gives up mid-stream: the worker gets a cancel.
      const conn = await Deno.connect({
        hostname: "127.0.0.1",
        port: relay.port,
      });
      const body = chatBody("m1", true);
      await conn.write(
        new TextEncoder().encode(
          `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n` +
            `content-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
        ),
      );
      const req2 = await w.next("request");
      w.send({
        type: "response_chunk",
        request_id: req2.request_id,
        chunk: "data: {}\n\n",
      });
      await waitFor(
        "the chunk to reach the client socket",
        () => relay.metrics.chunks === 5,
      );
      conn.close();
      const cancel = await w.next("cancel");
      assert.equal(cancel.reason, "client_disconnect");
      w.complete(req2);

      // A worker with the wrong secret.
      const bad = await connectWorker(relay, { secret: "wrong" });
      await waitFor(
        "the bad worker to be refused",
        () => bad.ws.readyState === WebSocket.CLOSED,
      );

      await waitFor(
        "the cancelled request to finish",
        () => relay.metrics.requestsByOutcome().cancelled === 1,
      );
      const after = await scrape(relay);
      const completed = {
        route: "/v1/chat/completions",
        model: "m1",
        outcome: "completed",
      };
      assert.equal(value(after, "modelrelay_requests_total", completed), 4);
      assert.equal(
        value(after, "modelrelay_requests_total", {
          ...completed,
          outcome: "rejected",
        }),
        1,
      );
      assert.equal(
        value(after, "modelrelay_requests_total", {
          ...completed,
          outcome: "cancelled",
        }),
        1,
      );
      assert.equal(
        value(after, "modelrelay_responses_total", { status: "503" }),
        1,
      );
      assert.equal(value(after, "modelrelay_request_duration_seconds"), 6);
      assert.equal(value(after, "modelrelay_time_to_first_byte_seconds"), 3);
      const ttfb = after.get("modelrelay_time_to_first_byte_seconds")!
        .metrics[0]!;
      assert.equal(ttfb.buckets?.["+Inf"], "3");
      assert.equal(value(after, "modelrelay_stream_chunks_total"), 5);
      assert.ok(value(after, "modelrelay_stream_bytes_total") > 100);
      assert.equal(
        value(after, "modelrelay_cancels_total", {
          reason: "client_disconnect",
        }),
        1,
      );
      assert.equal(
        value(after, "modelrelay_auth_failures_total", {
          kind: "worker_secret",
        }),
        1,
      );
      assert.equal(value(after, "modelrelay_worker_registrations_total"), 1);
      assert.equal(value(after, "modelrelay_in_flight_requests"), 0);

      // /admin/stats reports from the same counters.
      const stats = await (await admin(relay, "/admin/stats")).json();
      assert.equal(stats.requests_total, 6);
      assert.equal(stats.chunks_streamed_total, 5);
      assert.equal(
        stats.bytes_streamed_total,
        value(after, "modelrelay_stream_bytes_total"),
      );
      assert.deepEqual(stats.cancels_by_reason, { client_disconnect: 1 });
      await w.close();
    },
  );
});

Deno.test("histogram quantiles interpolate inside buckets like histogram_quantile", () => {
  const h = new Histogram();
  assert.equal(h.quantile(0.5), null);
  for (let i = 0; i < 10; i++) h.observe(0.2); // (0.1, 0.25]
  assert.ok(Math.abs(h.quantile(0.5)! - 0.175) < 1e-9);
  h.observe(1000); // +Inf bucket: reported as its lower bound
  assert.equal(h.quantile(1), 300);
  assert.equal(h.count, 11);
});
