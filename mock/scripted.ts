// A fake backend that answers with a script of raw writes, each its own read
// on the other side (a pause in between): for the byte-level tests of a
// stream cut anywhere (characters split across writes, invalid UTF-8), at the
// worker's edge (shell/worker/chunk_bytes_test.ts) and through real processes
// (e2e/chunk_bytes_test.ts).

/** An event stream of `writes`, `pauseMs` apart. */
export function writesApart(writes: Uint8Array[], pauseMs: number): Response {
  return new Response(
    new ReadableStream<Uint8Array>({
      async start(c) {
        for (const w of writes) {
          c.enqueue(w);
          await new Promise((r) => setTimeout(r, pauseMs));
        }
        c.close();
      },
    }),
    { headers: { "content-type": "text/event-stream" } },
  );
}

/**
 * A loopback backend answering each request with the writes `scriptFor`
 * picks for it (`pauseMs` apart), or a 404 where it picks none.
 */
export function startScriptedBackend(
  scriptFor: (req: Request) => Promise<Uint8Array[] | undefined>,
  pauseMs: number,
): { url: string; close(): Promise<void> } {
  const server = Deno.serve(
    { port: 0, hostname: "127.0.0.1", onListen() {} },
    async (req) => {
      const writes = await scriptFor(req);
      return writes === undefined
        ? new Response(null, { status: 404 })
        : writesApart(writes, pauseMs);
    },
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    close: () => server.shutdown(),
  };
}
