import assert from "node:assert/strict";
import {
  startMockProcess,
  startServerProcess,
  startWorkerProcess,
} from "../../demo/cluster.ts";
import { waitUntil } from "../../procs.ts";
import { parseTraceparent, QUEUE_MAX, traceRequest } from "./tracing.ts";

Deno.test("issue 26 a malformed or all-zero traceparent starts a new trace; a valid one is continued with the relay's span", () => {
  for (
    const bad of [
      undefined,
      "garbage",
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
    ]
  ) {
    assert.equal(parseTraceparent(bad), null, String(bad));
  }
  const headers: Record<string, string> = {
    traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
  };
  const ids = traceRequest(headers);
  assert.equal(ids.traceId, "4bf92f3577b34da6a3ce929d0e0e4736");
  assert.equal(ids.parentSpanId, "00f067aa0ba902b7");
  // The sampled flag the client chose is kept.
  assert.equal(
    headers.traceparent,
    `00-4bf92f3577b34da6a3ce929d0e0e4736-${ids.dispatchSpanId}-00`,
  );
  const fresh: Record<string, string> = { traceparent: "nonsense" };
  const started = traceRequest(fresh);
  assert.equal(started.parentSpanId, null);
  assert.match(fresh.traceparent!, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
});

/**
 * A collector that accepts and, while `holding`, never answers (issue 33): it
 * reads nothing, so the export hangs as behind a stuck proxy. Otherwise it
 * answers each OTLP request 200 and counts its spans. Connections it holds are
 * let go (closed) when it starts answering.
 */
function hangingCollector() {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const all = new Set<Deno.Conn>();
  const c = {
    url: `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    holding: true,
    spans: 0,
    held,
    answer() {
      c.holding = false;
      for (const conn of held.splice(0)) closeQuietly(conn);
    },
    close() {
      listener.close();
      for (const conn of all) closeQuietly(conn);
    },
  };
  const serve = async (conn: Deno.Conn) => {
    all.add(conn);
    if (c.holding) return void held.push(conn);
    const reader = conn.readable.getReader();
    const writer = conn.writable.getWriter();
    let buf = new Uint8Array(0);
    try {
      for (;;) {
        const text = new TextDecoder("latin1").decode(buf);
        const headEnd = text.indexOf("\r\n\r\n");
        const length = /content-length:\s*(\d+)/i.exec(text)?.[1];
        if (headEnd >= 0 && length !== undefined) {
          const end = headEnd + 4 + Number(length);
          if (buf.length >= end) {
            const body = JSON.parse(
              new TextDecoder().decode(buf.subarray(headEnd + 4, end)),
            );
            for (const r of body.resourceSpans) {
              for (const s of r.scopeSpans) c.spans += s.spans.length;
            }
            buf = buf.subarray(end);
            await writer.write(
              new TextEncoder().encode(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}",
              ),
            );
            continue;
          }
        }
        if (c.holding && buf.length === 0) {
          // A kept-alive connection reused after holding began: hold it too.
          reader.releaseLock();
          writer.releaseLock();
          return void held.push(conn);
        }
        const { value, done } = await reader.read();
        if (done) return;
        const next = new Uint8Array(buf.length + value.length);
        next.set(buf);
        next.set(value, buf.length);
        buf = next;
      }
    } catch {
      // closed by the test
    }
  };
  (async () => {
    try {
      for await (const conn of listener) void serve(conn);
    } catch {
      // listener closed
    }
  })();
  return c;
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch {
    // already closed
  }
}

function dropped(metrics: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (
    const m of metrics.matchAll(
      /^modelrelay_spans_dropped_total\{reason="(\w+)"\} (\d+)$/gm,
    )
  ) out[m[1]!] = Number(m[2]);
  return out;
}

const sum = (r: Record<string, number>) =>
  Object.values(r).reduce((a, b) => a + b, 0);

Deno.test("issue 33 a collector that accepts and never answers holds at most QUEUE_MAX spans (the oldest dropped and counted) and does not stop SIGTERM", async () => {
  const collector = hangingCollector();
  const mock = await startMockProcess({ delayMs: 0 });
  const server = await startServerProcess({
    secret: "trace-secret",
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url },
  });
  const worker = await startWorkerProcess({
    name: "w1",
    serverUrl: server.url,
    secret: "trace-secret",
    backendUrl: mock.url,
  });
  try {
    // A model no worker serves: an immediate 404, traced as two spans
    // (modelrelay.request and modelrelay.queue_wait).
    const requests = 5000;
    let next = 0;
    const client = async () => {
      while (next < requests) {
        next++;
        const r = await fetch(`${server.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "nobody-serves-this", messages: [] }),
        });
        await r.body?.cancel();
        assert.equal(r.status, 404);
      }
    };
    await Promise.all(Array.from({ length: 8 }, client));
    const spans = 2 * requests;
    assert.ok(spans > QUEUE_MAX + 512);
    const metrics = async () =>
      await (await fetch(`${server.url}/metrics`)).text();
    await waitUntil("an export to hang", () => collector.held.length > 0);
    const whileHung = dropped(await metrics());
    assert.ok((whileHung.queue_full ?? 0) > 0, JSON.stringify(whileHung));

    // The collector answers again: what the relay still held arrives, the
    // rest was counted as dropped: at most QUEUE_MAX spans were ever held
    // (on 9ef0db5 every span waited behind the hung export).
    collector.answer();
    let after: Record<string, number> = {};
    await waitUntil("every span exported or counted as dropped", async () => {
      after = dropped(await metrics());
      return collector.spans + sum(after) === spans;
    });
    assert.ok(collector.spans > 0);
    assert.ok(collector.spans <= QUEUE_MAX, String(collector.spans));
    assert.ok((after.export_failed ?? 0) > 0, JSON.stringify(after));

    // Hung again, with an export in flight: SIGTERM still ends the process,
    // cleanly, once close() gives up on the export.
    collector.holding = true;
    const r = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "nobody-serves-this", messages: [] }),
    });
    await r.body?.cancel();
    await waitUntil("the next export to hang", () => collector.held.length > 0);
    const status = await server.child.stop(30_000);
    assert.equal(status.code, 0, server.child.tail());
    assert.match(server.child.tail(), /spans not exported/);
  } finally {
    await worker.stop(3_000);
    await server.child.stop(3_000);
    await mock.child.stop(3_000);
    collector.close();
  }
});
