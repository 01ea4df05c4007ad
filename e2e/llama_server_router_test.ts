// Issue 14: the worker's lifecycle adapter against the REAL llama-server in
// router mode (`llama-server --models-dir ../shared/llama --no-models-autoload`:
// no model runs until one is loaded; each loaded model is a child llama-server).
// Unlike a single-model llama-server, this one really loads and unloads: directly
// through the adapter, and as governed operations through the relay. Ignored
// (with a console message) where ../shared/llama is absent.
import assert from "node:assert/strict";
import OpenAI from "openai";
import { waitUntil } from "../shell/procs.ts";
import { detectBackend } from "../shell/worker/lifecycle/backends.ts";
import { readCapabilities } from "../shell/worker/lifecycle/capabilities.ts";
import {
  assertFailed,
  runAdapter,
} from "../shell/worker/lifecycle/_run_adapter.ts";
import {
  ADMIN_TOKEN,
  governedLoad,
  KEY_PATH,
  LLAMA_MODEL,
  llamaTest,
  opToken,
  postJson,
  startLlamaRouter,
  withLlamaCluster,
} from "./_llama.ts";
import { openaiAt } from "./_sdk.ts";

/** What the worker's adapter detects this backend as. */
const ROUTER = "llama-router";

/** The router's own status of `model`: unloaded, loading, loaded, … */
async function routerStatus(url: string, model: string): Promise<string> {
  const list = await (await fetch(`${url}/models`)).json() as {
    data: { id: string; status: { value: string } }[];
  };
  return list.data.find((m) => m.id === model)?.status.value ?? "absent";
}

/** The per-slot context of a loaded model, as the router's /props says. */
async function modelCtx(url: string, model: string): Promise<number> {
  const props = await (await fetch(`${url}/props?model=${model}`)).json();
  return props.default_generation_settings.n_ctx;
}

llamaTest(
  "lifecycle adapter: a real llama-server in router mode is detected as llama-router, loads and unloads tiny, and reports each state",
  async (t) => {
    const router = await startLlamaRouter();
    try {
      await t.step("detectBackend says llama-router", async () => {
        assert.equal(await detectBackend(router.url), "llama-router");
      });

      await t.step(
        "capabilities before a load: tiny available, nothing loaded",
        async () => {
          assert.deepEqual(await readCapabilities(router.url, "llama-router"), {
            runnerType: "llama-router",
            models: { loaded: [], loading: [], available: [LLAMA_MODEL] },
            capabilities: { streaming: true },
            health: "healthy",
          });
        },
      );

      await t.step(
        "model-load reports running while the router loads, then completed; capabilities show it loaded",
        async () => {
          const updates = await runAdapter(router.url, ROUTER, "model-load", {
            modelId: LLAMA_MODEL,
          });
          const last = updates.at(-1)!;
          assert.equal(last.status, "completed", last.error ?? "");
          assert.equal(last.result?.modelId, LLAMA_MODEL);
          assert.ok(
            updates.slice(0, -1).every((u) => u.status === "running"),
            JSON.stringify(updates),
          );
          console.log(
            `load: ${
              updates.length - 1
            } running report(s), ${last.result?.loadTimeMs} ms`,
          );
          assert.equal(await routerStatus(router.url, LLAMA_MODEL), "loaded");
          assert.deepEqual(await readCapabilities(router.url, "llama-router"), {
            runnerType: "llama-router",
            models: {
              loaded: [{
                id: LLAMA_MODEL,
                contextLength: await modelCtx(router.url, LLAMA_MODEL),
              }],
              loading: [],
              available: [],
            },
            capabilities: { streaming: true },
            health: "healthy",
          });
        },
      );

      await t.step(
        "model-unload completes and the router unloads tiny",
        async () => {
          const last = (await runAdapter(router.url, ROUTER, "model-unload", {
            modelId: LLAMA_MODEL,
          })).at(-1)!;
          assert.equal(last.status, "completed", last.error ?? "");
          await waitUntil(
            "the router to report tiny unloaded",
            async () =>
              await routerStatus(router.url, LLAMA_MODEL) === "unloaded",
            10_000,
          );
        },
      );

      await t.step(
        "a model the router does not have fails with its 404; cache-flush is 501",
        async () => {
          const load = (await runAdapter(router.url, ROUTER, "model-load", {
            modelId: "nope",
          })).at(-1)!;
          assertFailed(load, /backend answered 404/, 404);
          const flush = (await runAdapter(router.url, ROUTER, "cache-flush", {
            scope: "all",
          }))
            .at(-1)!;
          assertFailed(flush, /llama-router backend has no cache-flush/, 501);
        },
      );
    } finally {
      await router.child.stop(5_000);
    }
  },
);

llamaTest(
  "through the relay, llama-server router mode: a chat before the load gets the router's 400, a governed load makes tiny answer, a governed unload stops it",
  async (t) => {
    await withLlamaCluster(async (c) => {
      const openai = openaiAt(c.serverUrl);
      const chat = () =>
        openai.chat.completions.create({
          model: LLAMA_MODEL,
          messages: [{ role: "user", content: "Hello!" }],
          max_tokens: 4,
        });
      const post = (path: string, body: unknown) =>
        postJson(c.serverUrl, path, body);

      await t.step(
        "before any load, a chat reaches the router and gets its 400 'model is not loaded'",
        async () => {
          const err = await chat().then(() => null, (e: unknown) => e);
          assert.ok(err instanceof OpenAI.BadRequestError, `got ${err}`);
          assert.match(err.message, /model is not loaded/);
        },
      );

      await t.step(
        "POST /v1/models/load: the task completes, then the chat answers",
        async () => {
          const task = await governedLoad(c.serverUrl, LLAMA_MODEL, 20_000);
          assert.equal(task.status, "completed", JSON.stringify(task));
          assert.equal(await routerStatus(c.llama.url, LLAMA_MODEL), "loaded");
          const answer = await chat();
          assert.equal(answer.choices[0]?.finish_reason, "length");
          assert.equal(answer.usage?.completion_tokens, 4);
        },
      );

      await t.step(
        "GET /v1/capabilities shows tiny loaded, as the worker read it from the router",
        async () => {
          // The worker re-reads its backend every 5 s and reports changes.
          let loaded: unknown = null;
          await waitUntil("the worker to report tiny loaded", async () => {
            // Per-worker detail is for the admin token only (issue 15).
            const fleet = await (await fetch(`${c.serverUrl}/v1/capabilities`, {
              headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
            })).json();
            loaded = fleet.workers[0]?.reported?.models?.loaded;
            return Array.isArray(loaded) && loaded.length === 1;
          }, 15_000);
          assert.deepEqual(loaded, [{
            id: LLAMA_MODEL,
            contextLength: await modelCtx(c.llama.url, LLAMA_MODEL),
          }]);
        },
      );

      await t.step(
        "POST /v1/models/unload answers 200 and the router unloads tiny",
        async () => {
          const r = await post("/v1/models/unload", {
            modelId: LLAMA_MODEL,
            verifiedOpToken: opToken("model-unload", LLAMA_MODEL),
          });
          assert.equal(r.status, 200, JSON.stringify(r.body));
          await waitUntil(
            "the router to report tiny unloaded",
            async () =>
              await routerStatus(c.llama.url, LLAMA_MODEL) === "unloaded",
            10_000,
          );
        },
      );
    }, {
      router: true,
      serverEnv: {
        MODELRELAY_ADMIN_TOKEN: ADMIN_TOKEN,
        VERIFIED_OP_TOKEN_KEY_PATH: KEY_PATH,
        OP_TOKEN_SIGNERS: "admin1",
        OP_TOKEN_MIN_SIGNERS: "1",
      },
    });
  },
);
