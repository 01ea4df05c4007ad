import assert from "node:assert/strict";
import {
  startSwappingBackend,
  type SwappingBackend,
  type SwappingBackendOptions,
  type SwappingDialect,
} from "./swapping.ts";
import { detectBackend } from "../shell/worker/lifecycle/backends.ts";
import { runAdapter } from "../shell/worker/lifecycle/_run_adapter.ts";
import { readCapabilities } from "../shell/worker/lifecycle/capabilities.ts";
import { spawnChild } from "../shell/procs.ts";
import { withClosing } from "../shell/with_closing.ts";

/** A test on a swapping backend started with `opts`, closed after it whatever it throws. */
function swapTest(
  name: string,
  opts: SwappingBackendOptions,
  fn: (b: SwappingBackend) => Promise<void>,
): void {
  Deno.test(name, () => withClosing(startSwappingBackend(opts), fn));
}

function chat(url: string, model: string, stream = false) {
  return fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model,
      stream,
      messages: [{ role: "user", content: "hi" }],
    }),
  });
}

async function content(res: Response): Promise<string> {
  const text = await res.text();
  if (!text.startsWith("data: ")) {
    return JSON.parse(text).choices[0].message.content;
  }
  return text.split("\n").filter((l) => l.startsWith("data: {")).map((l) =>
    JSON.parse(l.slice(6)).choices[0]?.delta?.content ?? ""
  ).join("");
}

for (const dialect of ["ollama", "llama-swap"] as SwappingDialect[]) {
  swapTest(
    `${dialect} fake: one model resident, each change of model is a load, counted`,
    {
      dialect,
      models: ["a", "b"],
      loadDelayMs: 20,
      chunkDelayMs: 0,
      answer: "one two",
    },
    async (b) => {
      assert.equal(await content(await chat(b.url, "a")), "one two");
      assert.equal(await content(await chat(b.url, "a", true)), "one two");
      assert.deepEqual(b.resident(), ["a"]);
      await (await chat(b.url, "b")).text();
      await (await chat(b.url, "a")).text();
      assert.equal(b.stats.loads, 3);
      assert.deepEqual(b.stats.loadsByModel, { a: 2, b: 1 });
      assert.equal(b.stats.unloads, 2);
      assert.equal(b.stats.requests, 4);
      assert.deepEqual(b.resident(), ["a"]);
    },
  );

  swapTest(
    `${dialect} fake: a request for another model waits until the resident one's stream ends`,
    {
      dialect,
      models: ["a", "b"],
      loadDelayMs: 0,
      chunkDelayMs: 30,
      answer: "w1 w2 w3 w4",
    },
    async (b) => {
      const order: string[] = [];
      const first = chat(b.url, "a", true).then(async (r) => {
        await r.text();
        order.push("a done");
      });
      // Let the first take the box before asking for the other model.
      while (b.resident().length === 0) {
        await new Promise((r) => setTimeout(r, 5));
      }
      const second = chat(b.url, "b").then(async (r) => {
        await r.text();
        order.push("b done");
      });
      await Promise.all([first, second]);
      assert.deepEqual(order, ["a done", "b done"]);
      assert.equal(b.stats.loads, 2);
    },
  );

  swapTest(
    `${dialect} fake: the worker's lifecycle adapter detects it and loads through it`,
    {
      dialect,
      models: ["a", "b"],
      loaded: ["b"],
      loadDelayMs: 0,
    },
    async (b) => {
      assert.equal(await detectBackend(b.url), dialect);
      if (dialect === "ollama") {
        // /api/ps; llama-swap's /running is read by the residency report.
        const caps = await readCapabilities(b.url, dialect);
        assert.deepEqual(caps?.models?.loaded?.map((m) => m.id), ["b"]);
        assert.deepEqual(caps?.models?.available, ["a", "b"]);
      }
      const updates = await runAdapter(b.url, dialect, "model-load", {
        modelId: "a",
      });
      assert.equal(updates.at(-1)?.status, "completed");
      assert.deepEqual(b.resident(), ["a"]);
      assert.equal(b.stats.loads, 1);
    },
  );
}

swapTest(
  "ollama fake: /api/ps and /api/tags in Ollama's shapes; keep_alive 0 unloads",
  {
    dialect: "ollama",
    models: ["a", "b"],
    loaded: ["a"],
  },
  async (b) => {
    const tags = await (await fetch(`${b.url}/api/tags`)).json();
    assert.deepEqual(tags.models.map((m: { name: string }) => m.name), [
      "a",
      "b",
    ]);
    const ps = await (await fetch(`${b.url}/api/ps`)).json();
    assert.equal(ps.models.length, 1);
    const m = ps.models[0];
    assert.equal(m.name, "a");
    assert.equal(m.model, "a");
    assert.equal(typeof m.size_vram, "number");
    assert.ok(!Number.isNaN(Date.parse(m.expires_at)));
    const res = await fetch(`${b.url}/api/generate`, {
      method: "POST",
      body: JSON.stringify({ model: "a", prompt: "", keep_alive: 0 }),
    });
    assert.equal((await res.json()).done, true);
    assert.deepEqual(b.resident(), []);
    assert.equal(
      (await (await fetch(`${b.url}/api/ps`)).json()).models.length,
      0,
    );
  },
);

swapTest("ollama fake: /api/chat streams NDJSON lines ending with done", {
  dialect: "ollama",
  models: ["a"],
  loadDelayMs: 0,
  chunkDelayMs: 0,
  answer: "x y",
}, async (b) => {
  const res = await fetch(`${b.url}/api/chat`, {
    method: "POST",
    body: JSON.stringify({ model: "a", messages: [] }),
  });
  assert.equal(res.headers.get("content-type"), "application/x-ndjson");
  const lines = (await res.text()).trim().split("\n").map((l) => JSON.parse(l));
  assert.equal(
    lines.map((l) => l.message.content).join(""),
    "x y",
  );
  assert.equal(lines.at(-1).done, true);
  assert.equal(b.stats.loads, 1);
});

swapTest(
  "llama-swap fake: /running lists the resident model as ready; /unload empties it",
  {
    dialect: "llama-swap",
    models: ["a", "b"],
    loaded: ["b"],
  },
  async (b) => {
    assert.deepEqual(await (await fetch(`${b.url}/running`)).json(), {
      running: [{ model: "b", state: "ready" }],
    });
    const res = await fetch(`${b.url}/unload`, { method: "POST" });
    assert.equal(await res.text(), "OK");
    assert.deepEqual(await (await fetch(`${b.url}/running`)).json(), {
      running: [],
    });
    // llama-swap has no Ollama routes: the adapter must not take it for one.
    const tags = await fetch(`${b.url}/api/tags`);
    await tags.body?.cancel();
    assert.equal(tags.status, 404);
  },
);

Deno.test("mock/main.ts --swap llama-swap runs a swapping box on its own", async () => {
  const child = spawnChild({
    name: "mock-swap",
    script: "mock/main.ts",
    permissions: ["--allow-net=127.0.0.1"],
    args: [
      "--port",
      "0",
      "--swap",
      "llama-swap",
      "--models",
      "a,b",
      "--load-delay-ms",
      "0",
    ],
  });
  try {
    const m = await child.waitForLine(/listening on (http:\/\/\S+)/);
    const url = m[1]!;
    assert.equal(
      await content(await chat(url, "b")),
      "Swapped in and answering every word in order.",
    );
    assert.deepEqual(await (await fetch(`${url}/running`)).json(), {
      running: [{ model: "b", state: "ready" }],
    });
  } finally {
    await child.stop(2_000);
  }
});
