// `deno task test:cluster`, issue 30 item 7: residency (what each worker's
// backend holds loaded, residency-v1) is an ordinary logged core event, so
// every replica routes by it. Two swapping boxes (mock/swapping.ts), one
// model resident in each, their workers attached to one instance; clients on
// the other instance are sent to the box that holds their model, and no box
// loads anything it already had. A model loaded later (its residency frame
// logged while both instances run) is routed hot too.
import assert from "node:assert/strict";
import { withFleet } from "./_fleet.ts";
import {
  startSwappingBackend,
  type SwappingBackend,
} from "../../../mock/swapping.ts";
import { waitUntil } from "../../procs.ts";
import { postChat } from "../../../e2e/_post_chat.ts";

const MODELS = ["m-alpha", "m-beta", "m-gamma"];

function box(loaded: string): Promise<SwappingBackend> {
  return startSwappingBackend({
    dialect: "ollama",
    models: MODELS,
    loaded: [loaded],
    room: 2,
    loadDelayMs: 300,
    chunkDelayMs: 1,
  });
}

async function ask(url: string, model: string): Promise<void> {
  const res = await postChat(url, {
    model,
    messages: [{ role: "user", content: "hi" }],
  });
  assert.equal(res.status, 200, await res.text());
}

async function statusAt(url: string, model: string): Promise<string> {
  return (await (await fetch(`${url}/v1/models/${model}`)).json()).status;
}

Deno.test("cluster, issue 30: residency replicates: clients on one instance of 2 are routed to the worker on the other whose backend holds their model loaded, with no extra load; a model loaded later is routed hot too", async () => {
  const one = await box("m-alpha");
  const two = await box("m-beta");
  try {
    await withFleet({
      instances: 1,
      workers: [
        { name: "hot-w1", maxConcurrent: 4, backendUrl: one.url },
        { name: "hot-w2", maxConcurrent: 4, backendUrl: two.url },
      ],
    }, async (f) => {
      // Both workers are on the first instance; the clients' joins after.
      const clients = await f.addInstance();
      await waitUntil("the second instance to see both workers", async () => {
        const h = await (await fetch(`${clients.url}/health`)).json();
        return h.workers_connected === 2;
      });
      for (const m of ["m-alpha", "m-beta"]) {
        await waitUntil(
          `${m} to show loaded on the clients' instance`,
          async () => await statusAt(clients.url, m) === "loaded",
        );
      }
      for (let i = 0; i < 4; i++) {
        await ask(clients.url, "m-alpha");
        await ask(clients.url, "m-beta");
      }
      assert.deepEqual(
        [one.stats.requests, two.stats.requests],
        [4, 4],
        "each model went to the box holding it",
      );
      assert.deepEqual([one.stats.loads, two.stats.loads], [0, 0]);

      // A model neither holds: one load, logged while both instances run.
      await ask(clients.url, "m-gamma");
      assert.equal(one.stats.loads + two.stats.loads, 1);
      const holder = one.stats.loads === 1 ? one : two;
      await waitUntil(
        "m-gamma to show loaded on the clients' instance",
        async () => await statusAt(clients.url, "m-gamma") === "loaded",
      );
      const before = holder.stats.requests;
      for (let i = 0; i < 3; i++) await ask(clients.url, "m-gamma");
      assert.equal(holder.stats.requests - before, 3, "m-gamma went hot");
      assert.equal(one.stats.loads + two.stats.loads, 1, "no second load");
    });
  } finally {
    await one.close();
    await two.close();
  }
});
