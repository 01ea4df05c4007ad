// Issue 14: the worker's spec 004 lifecycle adapter (shell/worker/lifecycle/)
// against a REAL single-model llama-server (../shared/llama): what it detects,
// the capabilities it reports, and what each governed operation does, directly
// and through the relay. What a single-model llama-server cannot do (load
// another model, unload its own) is a 501 that says so. Ignored (with a console
// message) where ../shared/llama is absent.
import assert from "node:assert/strict";
import { waitUntil } from "../shell/procs.ts";
import { detectBackend } from "../shell/worker/lifecycle/backends.ts";
import { readCapabilities } from "../shell/worker/lifecycle/capabilities.ts";
import {
  assertFailed,
  runAdapter,
  type Update,
} from "../shell/worker/lifecycle/_run_adapter.ts";
import {
  ADMIN_TOKEN,
  governedLoad,
  KEY_PATH,
  LLAMA_MODEL,
  LLAMA_SLOT_CTX,
  llamaTest,
  opToken,
  postJson,
  startLlamaServer,
  withLlamaCluster,
} from "./_llama.ts";
import { postChat } from "./_post_chat.ts";

/** Runs one operation through the adapter; returns its last report. */
async function run(
  url: string,
  operation: Parameters<typeof runAdapter>[2],
  params: Record<string, unknown>,
): Promise<Update> {
  return (await runAdapter(url, "llama-server", operation, params)).at(-1)!;
}

/** What the worker reports for start.sh's llama-server (-np 4 -c 4096, tiny). */
const EXPECTED_CAPABILITIES = {
  runnerType: "llama-server",
  models: {
    loaded: [{ id: LLAMA_MODEL, contextLength: LLAMA_SLOT_CTX }],
    loading: [],
    available: [],
  },
  capabilities: {
    streaming: true,
    visionInput: false,
    audioInput: false,
    functionCalling: false,
  },
  health: "healthy",
  queue: { depth: 0, maxDepth: 4 },
};

async function chat(url: string): Promise<void> {
  const res = await postChat(url, {
    model: LLAMA_MODEL,
    max_tokens: 4,
    messages: [{ role: "user", content: "Hello!" }],
  });
  const text = await res.text();
  assert.equal(res.status, 200, text);
}

llamaTest(
  "lifecycle adapter: a real single-model llama-server is detected as llama-server and reports what it can and cannot do",
  async (t) => {
    const llama = await startLlamaServer();
    try {
      await t.step("detectBackend says llama-server", async () => {
        assert.equal(await detectBackend(llama.url), "llama-server");
      });

      await t.step(
        "capabilities: the model from /v1/models, n_ctx, modalities and tool support from /props, slots from /slots",
        async () => {
          assert.deepEqual(
            await readCapabilities(llama.url, "llama-server"),
            EXPECTED_CAPABILITIES,
          );
        },
      );

      await t.step(
        "model-load of the served model completes at once (it is loaded)",
        async () => {
          const u = await run(llama.url, "model-load", {
            modelId: LLAMA_MODEL,
          });
          assert.equal(u.status, "completed", u.error ?? "");
          assert.deepEqual(u.result, {
            modelId: LLAMA_MODEL,
            loadTimeMs: 0,
            alreadyLoaded: true,
          });
        },
      );

      await t.step(
        "model-load of another model and model-unload fail 501, saying why",
        async () => {
          const load = await run(llama.url, "model-load", { modelId: "other" });
          assertFailed(
            load,
            /^501 not implemented: this llama-server serves only "tiny" and cannot load "other"/,
            501,
          );
          const unload = await run(llama.url, "model-unload", {
            modelId: LLAMA_MODEL,
          });
          assertFailed(
            unload,
            /single-model llama-server cannot unload "tiny"/,
            501,
          );
        },
      );

      await t.step(
        "cache-flush without --slot-save-path carries llama-server's own 501; by tenant it is 501 before any call",
        async () => {
          const all = await run(llama.url, "cache-flush", { scope: "all" });
          assertFailed(all, /backend answered 501: .*--slot-save-path/, 501);
          const tenant = await run(llama.url, "cache-flush", {
            scope: "tenant",
            tenantId: "t1",
          });
          assertFailed(
            tenant,
            /can flush only its whole KV cache .* not scope "tenant"/,
          );
        },
      );
    } finally {
      await llama.child.stop(5_000);
    }
  },
);

llamaTest(
  "lifecycle adapter: cache-flush erases every slot of a llama-server started with --slot-save-path",
  async () => {
    // Erasing writes nothing; llama-server only requires the directory to exist.
    const llama = await startLlamaServer([
      "--slot-save-path",
      Deno.env.get("TMPDIR") ?? "/tmp",
    ]);
    try {
      await chat(llama.url); // leaves its tokens in one slot's KV cache
      const u = await run(llama.url, "cache-flush", { scope: "all" });
      assert.equal(u.status, "completed", u.error ?? "");
      assert.equal(u.result?.flushed, true);
      assert.equal(u.result?.slots, 4);
      assert.ok(
        (u.result?.entriesRemoved as number) > 0,
        JSON.stringify(u.result),
      );
      const again = await run(llama.url, "cache-flush", {
        scope: "model",
        modelId: LLAMA_MODEL,
      });
      assert.equal(again.status, "completed", again.error ?? "");
      assert.equal(again.result?.entriesRemoved, 0);
    } finally {
      await llama.child.stop(5_000);
    }
  },
);

llamaTest(
  "through the relay: GET /v1/capabilities shows what the worker read from llama-server; a governed load of tiny completes, an unload is 501",
  async (t) => {
    await withLlamaCluster(async (c) => {
      const post = (path: string, body: unknown) =>
        postJson(c.serverUrl, path, body);

      await t.step(
        "GET /v1/capabilities lists the worker's llama-server report",
        async () => {
          let fleet: {
            workers: { reported: unknown }[];
            models: { loaded: { id: string; contextLength?: number }[] };
          } | null = null;
          // The worker reports right after registering; answers are cached 5 s.
          await waitUntil(
            "the worker's capabilities at the server",
            async () => {
              const res = await fetch(`${c.serverUrl}/v1/capabilities`, {
                headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
              });
              fleet = await res.json();
              return fleet?.workers[0]?.reported != null;
            },
            15_000,
          );
          assert.deepEqual(fleet!.workers[0]!.reported, EXPECTED_CAPABILITIES);
          assert.equal(fleet!.models.loaded[0]?.id, LLAMA_MODEL);
          assert.equal(fleet!.models.loaded[0]?.contextLength, LLAMA_SLOT_CTX);
        },
      );

      await t.step(
        "POST /v1/models/load of tiny is accepted and its task completes",
        async () => {
          const task = await governedLoad(c.serverUrl, LLAMA_MODEL, 10_000);
          assert.equal(task.status, "completed", JSON.stringify(task));
        },
      );

      await t.step(
        "POST /v1/models/unload of tiny answers 501 with the worker's reason",
        async () => {
          const r = await post("/v1/models/unload", {
            modelId: LLAMA_MODEL,
            verifiedOpToken: opToken("model-unload", LLAMA_MODEL),
          });
          assert.equal(r.status, 501, JSON.stringify(r.body));
          assert.match(
            JSON.stringify(r.body),
            /single-model llama-server cannot unload/,
          );
        },
      );
    }, {
      serverEnv: {
        VERIFIED_OP_TOKEN_KEY_PATH: KEY_PATH,
        OP_TOKEN_SIGNERS: "admin1",
        OP_TOKEN_MIN_SIGNERS: "1",
        MODELRELAY_ADMIN_TOKEN: ADMIN_TOKEN,
      },
    });
  },
);
