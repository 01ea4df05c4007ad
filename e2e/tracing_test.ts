// Issue 26 traces, real processes (mock backend, server, worker): the client's
// W3C traceparent reaches the backend with the relay's dispatch span as its
// parent, and the relay sends the request's spans over OTLP/HTTP to a receiver
// this test starts itself.
import assert from "node:assert/strict";
import { waitUntil } from "../shell/procs.ts";
import { MODEL, withCluster } from "./_cluster.ts";
import { postChat } from "./_post_chat.ts";

type Span = {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: Array<{ key: string; value: Record<string, string> }>;
};

/** An OTLP/HTTP JSON receiver: every span POSTed to /v1/traces. */
function startReceiver(): {
  url: string;
  spans: Span[];
  close: () => Promise<void>;
} {
  const spans: Span[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req) => {
      if (req.method !== "POST" || new URL(req.url).pathname !== "/v1/traces") {
        return new Response("no", { status: 404 });
      }
      assert.equal(req.headers.get("content-type"), "application/json");
      const body = await req.json();
      for (const rs of body.resourceSpans) {
        assert.equal(rs.resource.attributes[0].value.stringValue, "modelrelay");
        for (const ss of rs.scopeSpans) spans.push(...ss.spans);
      }
      return Response.json({});
    },
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    spans,
    close: () => server.shutdown(),
  };
}

const CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN = "00f067aa0ba902b7";

Deno.test("issue 26 a request's spans reach an OTLP/HTTP receiver with their names and parents, and the backend sees the relay's span as its parent", async () => {
  const receiver = startReceiver();
  try {
    await withCluster({
      workers: [{ name: "gpu-t", maxConcurrent: 2 }],
      delayMs: 5,
      serverEnv: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url },
    }, async (c) => {
      const r = await postChat(c.serverUrl, {
        model: MODEL,
        messages: [{ role: "user", content: "trace me" }],
        max_tokens: 4,
        stream: true,
      }, { headers: { traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01` } });
      assert.equal(r.status, 200);
      await r.text();
      await waitUntil(
        "the relay's spans at the receiver",
        () => receiver.spans.length >= 5,
        10_000,
      );
      const byName = new Map(receiver.spans.map((s) => [s.name, s]));
      assert.deepEqual([...byName.keys()].sort(), [
        "modelrelay.completion",
        "modelrelay.dispatch",
        "modelrelay.first_byte",
        "modelrelay.queue_wait",
        "modelrelay.request",
      ]);
      assert.ok(receiver.spans.every((s) => s.traceId === CLIENT_TRACE));
      const request = byName.get("modelrelay.request")!;
      const dispatch = byName.get("modelrelay.dispatch")!;
      assert.equal(request.parentSpanId, CLIENT_SPAN);
      assert.equal(
        byName.get("modelrelay.queue_wait")!.parentSpanId,
        request.spanId,
      );
      assert.equal(dispatch.parentSpanId, request.spanId);
      assert.equal(
        byName.get("modelrelay.first_byte")!.parentSpanId,
        dispatch.spanId,
      );
      assert.equal(
        byName.get("modelrelay.completion")!.parentSpanId,
        dispatch.spanId,
      );
      // Times nest: the request span holds the others.
      for (const s of receiver.spans) {
        assert.ok(
          BigInt(s.startTimeUnixNano) >= BigInt(request.startTimeUnixNano),
          s.name,
        );
        assert.ok(
          BigInt(s.endTimeUnixNano) <= BigInt(request.endTimeUnixNano),
          s.name,
        );
      }
      const attr = (key: string) =>
        request.attributes.find((a) => a.key === key)?.value;
      assert.deepEqual(attr("modelrelay.worker"), { stringValue: "gpu-t" });
      assert.deepEqual(attr("gen_ai.usage.output_tokens"), { intValue: "4" });
      // The backend's parent is the relay's dispatch span, in the client's trace.
      const seen = (await c.stats()).lastHeaders as Record<string, string>;
      assert.equal(
        seen["traceparent"],
        `00-${CLIENT_TRACE}-${dispatch.spanId}-01`,
      );

      // Without a traceparent, one is started at the relay and still reaches the backend.
      const before = receiver.spans.length;
      const r2 = await postChat(c.serverUrl, {
        model: MODEL,
        messages: [{ role: "user", content: "new trace" }],
        max_tokens: 2,
      });
      await r2.text();
      const started = ((await c.stats()).lastHeaders as Record<string, string>)[
        "traceparent"
      ]!;
      assert.match(started, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      assert.ok(!started.includes(CLIENT_TRACE));
      await waitUntil(
        "the second request's spans",
        () => receiver.spans.length >= before + 4,
        10_000,
      );
      const root = receiver.spans.slice(before).find((s) =>
        s.name === "modelrelay.request"
      )!;
      assert.equal(root.parentSpanId, undefined);
      assert.equal(root.traceId, started.slice(3, 35));
    });
  } finally {
    await receiver.close();
  }
});
