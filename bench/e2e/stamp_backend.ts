// A backend for scenario (c) only: an OpenAI chat stream whose every chunk carries
// its sequence number `i` and the wall-clock time `t` (ms, sub-ms precision) at
// which it was written, so the load generator on the same machine can tell the
// latency of each chunk. The relay/direct difference cancels any clock offset.
//
//   deno run --allow-net=127.0.0.1 bench/e2e/stamp_backend.ts <port>
//   body `max_tokens`: chunks; header `x-mock-delay-ms`: ms between chunks.
const port = Number(Deno.args[0] ?? "0");
const encoder = new TextEncoder();

function wallMs(): number {
  return performance.timeOrigin + performance.now();
}

function stream(chunks: number, delayMs: number): ReadableStream<Uint8Array> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return new ReadableStream<Uint8Array>({
    start(controller) {
      let i = 0;
      const next = () => {
        if (i < chunks) {
          controller.enqueue(encoder.encode(
            `data: {"i":${i},"t":${
              wallMs().toFixed(3)
            },"choices":[{"index":0,"delta":{"content":"w "},"finish_reason":null}]}\n\n`,
          ));
          i++;
          timer = setTimeout(next, delayMs);
          return;
        }
        controller.enqueue(encoder.encode(
          `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n`,
        ));
        controller.close();
      };
      next();
    },
    cancel() {
      clearTimeout(timer);
    },
  });
}

Deno.serve({ hostname: "127.0.0.1", port, onListen() {} }, async (req) => {
  const path = new URL(req.url).pathname;
  if (req.method === "GET" && path === "/v1/models") {
    return Response.json({ object: "list", data: [{ id: "stamp-model" }] });
  }
  if (req.method !== "POST" || path !== "/v1/chat/completions") {
    return new Response("not found", { status: 404 });
  }
  const body = await req.json() as { max_tokens?: number; stream?: boolean };
  const chunks = body.max_tokens ?? 10;
  const delayMs = Number(req.headers.get("x-mock-delay-ms") ?? "20");
  if (body.stream !== true) {
    return Response.json({
      choices: [{ message: { role: "assistant", content: "w " } }],
    });
  }
  return new Response(stream(chunks, delayMs), {
    headers: { "content-type": "text/event-stream" },
  });
});
