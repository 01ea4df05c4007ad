// Issue 30, "Loads on demand": a real llama-server router started with
// --no-models-autoload serves a model only once asked to load it. With
// AUTO_LOAD=on the worker asks (and unloads the idle model first when the
// router has no room); with AUTO_LOAD=off the router's refusal reaches the
// client as today. Ignored (with a console message) where ../shared/llama is
// absent.
import assert from "node:assert/strict";
import { waitUntil } from "../shell/procs.ts";
import {
  ask,
  ROUTER_MODELS,
  routerModelsDir,
  startRouterBox,
  withFleet,
} from "./_fleet.ts";
import { llamaTest } from "./_llama.ts";
import { startMockRunner } from "../mock/runner.ts";

const [A, B] = ROUTER_MODELS;

/** The router's own status of each model: unloaded, loading, loaded. */
async function routerStatus(url: string): Promise<Record<string, string>> {
  const list = await (await fetch(`${url}/models`)).json() as {
    data: { id: string; status: { value: string } }[];
  };
  return Object.fromEntries(list.data.map((m) => [m.id, m.status.value]));
}

/** The relay's /v1/models status of `model`. */
async function relayStatus(serverUrl: string, model: string): Promise<string> {
  const res = await fetch(`${serverUrl}/v1/models/${model}`);
  return (await res.json()).status;
}

async function withNoAutoloadRouter(
  autoLoad: "on" | "off",
  body: (serverUrl: string, routerUrl: string) => Promise<void>,
): Promise<void> {
  const models = await routerModelsDir();
  try {
    const router = await startRouterBox(models.dir, ["--no-models-autoload"]);
    await withFleet([router], async ({ serverUrl }) => {
      // The worker has read what the router holds (nothing yet).
      await waitUntil(
        "the relay to know the router holds nothing",
        async () => (await relayStatus(serverUrl, A)) === "available",
      );
      await body(serverUrl, router.url);
    }, { workerEnv: { AUTO_LOAD: autoLoad } });
  } finally {
    await models.drop();
  }
}

llamaTest(
  "AUTO_LOAD=on: a request for a model no worker has loaded is answered through a --no-models-autoload router; another model takes its room",
  async () => {
    await withNoAutoloadRouter("on", async (serverUrl, routerUrl) => {
      assert.deepEqual(await routerStatus(routerUrl), {
        [A]: "unloaded",
        [B]: "unloaded",
      });
      assert.equal(await ask(serverUrl, A), null);
      assert.equal((await routerStatus(routerUrl))[A], "loaded");
      await waitUntil(
        "the relay to show the model loaded",
        async () => (await relayStatus(serverUrl, A)) === "loaded",
      );
      // Room for one: the idle model is unloaded for the next.
      assert.equal(await ask(serverUrl, B), null);
      assert.deepEqual(await routerStatus(routerUrl), {
        [A]: "unloaded",
        [B]: "loaded",
      });
    });
  },
);

llamaTest(
  "AUTO_LOAD=off: the --no-models-autoload router's refusal reaches the client, as today",
  async () => {
    await withNoAutoloadRouter("off", async (serverUrl, routerUrl) => {
      const error = await ask(serverUrl, A);
      assert.match(error ?? "", /400 .*model is not loaded/);
      assert.equal((await routerStatus(routerUrl))[A], "unloaded");
    });
  },
);

Deno.test("AUTO_LOAD=on with a spec 004 runner (mock/runner.ts): the worker loads the model through /v1/models/load, then the request is answered", async () => {
  const runner = await startMockRunner({ available: ["spec-a"], stepMs: 20 });
  await withFleet([{
    url: runner.url,
    loads: () => runner.stats.loads,
    close: runner.close,
  }], async ({ serverUrl }) => {
    await waitUntil(
      "the relay to know the runner holds nothing",
      async () => (await relayStatus(serverUrl, "spec-a")) === "available",
    );
    assert.equal(await ask(serverUrl, "spec-a"), null);
    assert.equal(runner.stats.loads, 1);
    assert.deepEqual(runner.loaded(), ["spec-a"]);
  }, {
    // The runner lists only loaded models: the worker is told what it serves.
    workerEnv: { AUTO_LOAD: "on", MODELS: "spec-a" },
  });
});
