// Issue 25 with a REAL llama.cpp llama-server (../shared/llama) started with
// `--embeddings --pooling mean`: /v1/embeddings through the relay gives the
// vectors llama-server gives directly (the official `openai` SDK, float and its
// default base64), and llama-server's own /tokenize and /detokenize are
// forwarded once FORWARD_PATH_PREFIXES lists them. Ignored (with a console
// message) where ../shared/llama is absent.
import assert from "node:assert/strict";
import { LLAMA_MODEL, llamaTest, withLlamaCluster } from "./_llama.ts";
import { openaiAt } from "./_sdk.ts";

llamaTest(
  "issue 25: llama-server --embeddings: vectors through the relay identical to direct; /tokenize when listed",
  async (t) => {
    await withLlamaCluster(async (c) => {
      const relay = openaiAt(c.serverUrl);
      const direct = openaiAt(c.llama.url);

      await t.step(
        "embeddings, float and base64, one input and a batch of 64",
        async () => {
          const batch = Array.from(
            { length: 64 },
            (_, i) => `short input ${i}`,
          );
          for (const input of ["Hello relay", batch]) {
            // Explicit float, and the SDK's default (base64 on the wire, decoded).
            for (const encoding of ["float", undefined] as const) {
              const req = {
                model: LLAMA_MODEL,
                input,
                ...(encoding === undefined
                  ? {}
                  : { encoding_format: encoding }),
              };
              const via = await relay.embeddings.create(req);
              const own = await direct.embeddings.create(req);
              assert.equal(via.data.length, Array.isArray(input) ? 64 : 1);
              assert.equal(via.data[0]!.embedding.length, 64); // n_embd
              assert.deepEqual(via.data, own.data);
            }
          }
        },
      );

      await t.step(
        "/tokenize and /detokenize, listed in FORWARD_PATH_PREFIXES, answer as llama-server does",
        async () => {
          for (
            const [path, body] of [
              ["/tokenize", { content: "Hello relay, tokenize me" }],
              ["/detokenize", { tokens: [15043, 29871, 29896] }],
              ["/v1/embeddings", { model: LLAMA_MODEL, input: "raw bytes" }],
            ] as const
          ) {
            const init = {
              method: "POST",
              headers: {
                "content-type": "application/json",
                "x-model": LLAMA_MODEL,
              },
              body: JSON.stringify(body),
            };
            const via = await fetch(`${c.serverUrl}${path}`, init);
            const own = await fetch(`${c.llama.url}${path}`, init);
            assert.equal(via.status, 200, path);
            assert.deepEqual(await via.json(), await own.json(), path);
          }
          // Not listed: the relay answers 404 itself.
          const r = await fetch(`${c.serverUrl}/infill`, {
            method: "POST",
            headers: { "x-model": LLAMA_MODEL },
            body: "{}",
          });
          assert.equal(r.status, 404);
          await r.body?.cancel();
        },
      );
    }, {
      llamaArgs: ["--embeddings", "--pooling", "mean"],
      serverEnv: { FORWARD_PATH_PREFIXES: "/tokenize,/detokenize" },
    });
  },
);
