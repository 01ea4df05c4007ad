// Issue 30: what the worker reads of its backend's residency, over HTTP, from
// stand-ins answering as llama-swap's /running and Ollama's /api/ps do.
import assert from "node:assert/strict";
import { makeLifecycle } from "./lifecycle/mod.ts";
import { readResidency } from "./lifecycle/residency.ts";

async function withBackend(
  routes: Record<string, unknown>,
  body: (base: string) => Promise<void>,
): Promise<void> {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    (req) => {
      const path = new URL(req.url).pathname;
      return path in routes
        ? Response.json(routes[path])
        : new Response("not found", { status: 404 });
    },
  );
  try {
    await body(`http://127.0.0.1:${server.addr.port}`);
  } finally {
    await server.shutdown();
  }
}

Deno.test("llama-swap's /running: ready is loaded, starting is loading, and it swaps", async () => {
  await withBackend({
    "/running": {
      running: [
        { model: "a", state: "ready" },
        { model: "b", state: "starting" },
        { model: "c", state: "stopping" },
      ],
    },
  }, async (base) => {
    assert.deepEqual(await readResidency(base, "llama-swap"), {
      loaded: ["a"],
      loading: ["b"],
      room: null,
      swaps: true,
    });
  });
});

Deno.test("Ollama's /api/ps lists what is loaded; /api/tags what it could load", async () => {
  await withBackend({
    "/api/ps": { models: [{ name: "a:latest", size_vram: 1 }] },
    "/api/tags": { models: [{ name: "a:latest" }, { name: "b:latest" }] },
  }, async (base) => {
    assert.deepEqual(await readResidency(base, "ollama"), {
      loaded: ["a:latest"],
      loading: [],
      room: null,
      swaps: true,
    });
  });
});

Deno.test("a plain OpenAI-compatible backend says nothing; an unreachable one fails the read", async () => {
  await withBackend({}, async (base) => {
    assert.deepEqual(await readResidency(base, "none"), {
      loaded: null,
      loading: [],
      room: null,
      swaps: false,
    });
    assert.equal(await readResidency(base, "llama-swap"), null);
  });
});

Deno.test("reading a plain backend's residency after every answer costs it no request once its kind is known", async () => {
  let calls = 0;
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () => {
      calls++;
      return new Response("not found", { status: 404 });
    },
  );
  const stop = new AbortController();
  try {
    const lc = makeLifecycle(
      `http://127.0.0.1:${server.addr.port}`,
      null,
      stop.signal,
    );
    assert.deepEqual(await lc.residency(), {
      loaded: null,
      loading: [],
      room: null,
      swaps: false,
    });
    const probes = calls;
    for (let i = 0; i < 5; i++) await lc.residency();
    assert.equal(calls, probes);
  } finally {
    stop.abort();
    await server.shutdown();
  }
});
