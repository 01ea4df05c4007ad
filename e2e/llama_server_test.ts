// Issue 14: the relay in front of a REAL llama.cpp llama-server (../shared/llama,
// tiny random-weight model), with the official `openai` and `@anthropic-ai/sdk`
// packages: llama-server, the relay server and a worker are separate processes.
// The model's text is gibberish, so the steps check shapes, counts, llama-server's
// own log and, at temperature 0, that the relay's answer equals llama-server's.
// Ignored (with a console message) where ../shared/llama is absent.
import assert from "node:assert/strict";
import OpenAI from "openai";
import type { Child } from "../shell/procs.ts";
import { waitUntil } from "../shell/procs.ts";
import {
  LLAMA_MODEL,
  LLAMA_SLOT_CTX,
  llamaTest,
  longPrompt,
  withLlamaCluster,
} from "./_llama.ts";
import { anthropicAt, openaiAt } from "./_sdk.ts";
import { postChat } from "./_post_chat.ts";

const HELLO = [{ role: "user" as const, content: "Hello!" }];

/** Waits for a line after index `from` of `child`'s output matching `re`. */
async function lineAfter(
  child: Child,
  from: number,
  re: RegExp,
  timeoutMs = 5_000,
): Promise<RegExpExecArray> {
  let m: RegExpExecArray | null = null;
  await waitUntil(`llama-server to log ${re}`, () => {
    for (const l of child.lines.slice(from)) {
      m = re.exec(l);
      if (m !== null) return true;
    }
    return false;
  }, timeoutMs);
  return m!;
}

llamaTest("real llama-server through the relay", async (t) => {
  await withLlamaCluster(async (c) => {
    const openai = openaiAt(c.serverUrl);
    const direct = openaiAt(c.llama.url);
    const anthropic = anthropicAt(c.serverUrl);

    await t.step(
      "models.list through the worker lists tiny, discovered from llama-server (no MODELS set)",
      async () => {
        const ids: string[] = [];
        for await (const m of openai.models.list()) ids.push(m.id);
        assert.deepEqual(ids, [LLAMA_MODEL]);
        assert.ok(
          c.worker.lines.some((l) =>
            /worker starting/.test(l) &&
            /models_source=discovered/.test(l) &&
            new RegExp(`models=${LLAMA_MODEL}\\b`).test(l)
          ),
          `worker log:\n${c.worker.lines.join("\n")}`,
        );
      },
    );

    await t.step(
      "chat.completions.create without stream: llama-server's answer, equal to the direct one at temperature 0",
      async () => {
        const body = {
          model: LLAMA_MODEL,
          messages: HELLO,
          max_tokens: 8,
          temperature: 0,
          cache_prompt: false, // (llama.cpp) both runs evaluate the whole prompt
        };
        const r = await openai.chat.completions.create(body);
        assert.equal(r.object, "chat.completion");
        assert.equal(r.model, LLAMA_MODEL);
        assert.equal(r.choices[0]?.finish_reason, "length");
        assert.equal(r.usage?.completion_tokens, 8);
        const d = await direct.chat.completions.create(body);
        assert.equal(
          r.choices[0]?.message.content,
          d.choices[0]?.message.content,
        );
      },
    );

    await t.step(
      "chat.completions.create with stream and include_usage: deltas, finish_reason, then the usage chunk",
      async () => {
        const body = {
          model: LLAMA_MODEL,
          messages: HELLO,
          max_tokens: 8,
          temperature: 0,
          cache_prompt: false,
          stream: true as const,
          stream_options: { include_usage: true },
        };
        const read = async (client: OpenAI) => {
          let text = "";
          let finish: string | null = null;
          let usage: OpenAI.CompletionUsage | null = null;
          let afterUsage = 0;
          for await (
            const chunk of await client.chat.completions.create(body)
          ) {
            if (usage !== null) afterUsage++;
            text += chunk.choices[0]?.delta.content ?? "";
            finish = chunk.choices[0]?.finish_reason ?? finish;
            if (chunk.usage) {
              assert.deepEqual(chunk.choices, [], "usage chunk has choices");
              usage = chunk.usage;
            }
          }
          return { text, finish, usage, afterUsage };
        };
        const r = await read(openai);
        assert.equal(r.finish, "length");
        assert.ok(r.usage !== null, "no usage chunk arrived");
        assert.equal(r.usage.completion_tokens, 8);
        assert.ok(r.usage.prompt_tokens > 0);
        assert.equal(r.afterUsage, 0, "chunks after the usage chunk");
        assert.ok(r.text.length > 0);
        assert.equal(r.text, (await read(direct)).text);
      },
    );

    await t.step(
      "completions.create (/v1/completions), streamed and not",
      async () => {
        const r = await openai.completions.create({
          model: LLAMA_MODEL,
          prompt: "Once upon a time",
          max_tokens: 8,
        });
        assert.equal(r.object, "text_completion");
        assert.equal(r.choices[0]?.finish_reason, "length");
        assert.ok((r.choices[0]?.text ?? "").length > 0);
        assert.equal(r.usage?.completion_tokens, 8);

        let text = "";
        let finish: string | null = null;
        let chunks = 0;
        for await (
          const chunk of await openai.completions.create({
            model: LLAMA_MODEL,
            prompt: "Once upon a time",
            max_tokens: 8,
            stream: true,
          })
        ) {
          chunks++;
          text += chunk.choices[0]?.text ?? "";
          finish = chunk.choices[0]?.finish_reason ?? finish;
        }
        assert.equal(finish, "length");
        assert.ok(chunks >= 8, `only ${chunks} chunks`);
        assert.ok(text.length > 0);
      },
    );

    await t.step(
      "anthropic messages.create (/v1/messages): one text block, stop_reason max_tokens",
      async () => {
        const m = await anthropic.messages.create({
          model: LLAMA_MODEL,
          max_tokens: 8,
          messages: HELLO,
        });
        assert.equal(m.type, "message");
        assert.equal(m.role, "assistant");
        assert.equal(m.stop_reason, "max_tokens");
        assert.equal(m.usage.output_tokens, 8);
        const block = m.content[0];
        assert.ok(block?.type === "text", JSON.stringify(m.content));
        assert.ok(block.text.length > 0);
      },
    );

    await t.step(
      "anthropic messages.stream: text deltas add up to the final message",
      async () => {
        const stream = anthropic.messages.stream({
          model: LLAMA_MODEL,
          max_tokens: 8,
          messages: HELLO,
        });
        let text = "";
        stream.on("text", (delta) => {
          text += delta;
        });
        const final = await stream.finalMessage();
        assert.equal(final.stop_reason, "max_tokens");
        assert.equal(final.usage.output_tokens, 8);
        const block = final.content[0];
        assert.ok(block?.type === "text");
        assert.equal(block.text, text);
        assert.ok(text.length > 0);
      },
    );

    await t.step(
      "responses.create (/v1/responses), streamed and not",
      async () => {
        const r = await openai.responses.create({
          model: LLAMA_MODEL,
          input: "Hello!",
          max_output_tokens: 8,
        });
        assert.equal(r.object, "response");
        assert.equal(r.status, "completed");
        assert.ok(r.output_text.length > 0);
        assert.equal(r.usage?.output_tokens, 8);

        let text = "";
        let completed: OpenAI.Responses.Response | null = null;
        for await (
          const event of await openai.responses.create({
            model: LLAMA_MODEL,
            input: "Hello!",
            max_output_tokens: 8,
            stream: true,
          })
        ) {
          if (event.type === "response.output_text.delta") text += event.delta;
          if (event.type === "response.completed") completed = event.response;
        }
        assert.ok(completed !== null, "no response.completed event");
        assert.ok(text.length > 0);
        const message = completed.output.find((o) => o.type === "message");
        const part = message?.content[0];
        assert.ok(part?.type === "output_text", JSON.stringify(completed));
        assert.equal(part.text, text);
      },
    );

    await t.step(
      "a llama-server error mid-stream (forced with logit_bias) reaches the openai SDK as an APIError after the chunks before it",
      async () => {
        // Biasing a lone UTF-8 lead byte makes llama-server's output parser fail
        // after a few chunks: it ends the 200 stream with a bare
        // `data: {"error":…}` line and no [DONE] (10 of 10 runs in its README).
        let err: unknown = null;
        let chunks = 0;
        for (let attempt = 0; attempt < 5 && err === null; attempt++) {
          chunks = 0;
          try {
            for await (
              const chunk of await openai.chat.completions.create({
                model: LLAMA_MODEL,
                messages: HELLO,
                max_tokens: 32,
                stream: true,
                logit_bias: { "198": 28 },
              })
            ) {
              if (chunk.choices[0]?.delta.content) chunks++;
            }
          } catch (e) {
            err = e;
          }
        }
        assert.ok(err instanceof OpenAI.APIError, `got ${err}`);
        assert.match(
          err.message,
          /does not match the expected peg-native format/,
        );
        console.log(`the error arrived after ${chunks} content chunk(s)`);
      },
    );

    /**
     * Opens a stream of ~1,000 tokens (the whole slot: ~1 s at this machine's
     * best), reads two content events, leaves; then llama-server's log must
     * show that task cancelled within 1 s and released well before the slot
     * limit.
     */
    const abortStep = (label: string, readTwoAndLeave: () => Promise<void>) =>
      t.step(
        `a client abort mid-stream makes llama-server cancel the task within 1 s: ${label}`,
        async () => {
          const from = c.llama.child.lines.length;
          await readTwoAndLeave();
          const abortedAt = performance.now();
          const task = (await lineAfter(
            c.llama.child,
            from,
            /launch_slot_: id +\d+ \| task (\d+) \| processing task/,
          ))[1]!;
          await lineAfter(
            c.llama.child,
            from,
            new RegExp(`stop: cancel task, id_task = ${task}\\b`),
          );
          const cancelMs = performance.now() - abortedAt;
          const release = await lineAfter(
            c.llama.child,
            from,
            new RegExp(
              `release: id +\\d+ \\| task ${task} \\| stop processing: n_tokens = (\\d+)`,
            ),
          );
          const nTokens = Number(release[1]);
          console.log(
            `llama-server task ${task}: cancel logged ${
              cancelMs.toFixed(0)
            } ms after the client left, released at n_tokens = ${nTokens}`,
          );
          assert.ok(cancelMs < 1_000, `cancel after ${cancelMs} ms`);
          assert.ok(
            nTokens < LLAMA_SLOT_CTX - 10,
            `generation ran to n_tokens = ${nTokens}: not cancelled early`,
          );
        },
      );

    for (
      const [label, headers] of [
        ["chat completions", {}],
        [
          "chat completions with X-Conversation-Id (the relay does not forward it: llama-server would not cancel a stream carrying it)",
          { "X-Conversation-Id": "e2e-llama-conv" },
        ],
      ] as const
    ) {
      await abortStep(label, async () => {
        const stream = await openai.chat.completions.create({
          model: LLAMA_MODEL,
          messages: HELLO,
          max_tokens: 1000,
          stream: true,
        }, { headers });
        let seen = 0;
        for await (const chunk of stream) {
          if (chunk.choices[0]?.delta.content) seen++;
          if (seen === 2) break; // Leaving the loop aborts the request.
        }
      });
    }

    await abortStep("anthropic messages", async () => {
      const stream = await anthropic.messages.create({
        model: LLAMA_MODEL,
        max_tokens: 1000,
        messages: HELLO,
        stream: true,
      });
      let seen = 0;
      for await (const event of stream) {
        if (event.type === "content_block_delta") seen++;
        if (seen === 2) break;
      }
    });

    await abortStep("responses", async () => {
      const stream = await openai.responses.create({
        model: LLAMA_MODEL,
        input: "Hello!",
        max_output_tokens: 1000,
        stream: true,
      });
      let seen = 0;
      for await (const event of stream) {
        if (event.type === "response.output_text.delta") seen++;
        if (seen === 2) break;
      }
    });

    const tooLong = {
      model: LLAMA_MODEL,
      max_tokens: 8,
      messages: [{ role: "user" as const, content: longPrompt(1400) }],
    };
    for (const stream of [false, true]) {
      await t.step(
        `a prompt longer than the slot reaches the client as llama-server's 400 exceed_context_size_error, body intact (stream: ${stream})`,
        async () => {
          const post = async (base: string) => {
            const res = await postChat(base, { ...tooLong, stream });
            return {
              status: res.status,
              type: res.headers.get("content-type"),
              body: await res.text(),
            };
          };
          const relayed = await post(c.serverUrl);
          const fromLlama = await post(c.llama.url);
          assert.equal(fromLlama.status, 400);
          assert.equal(relayed.status, 400);
          assert.match(relayed.type ?? "", /^application\/json/);
          assert.equal(relayed.body, fromLlama.body);
          const e = JSON.parse(relayed.body).error;
          assert.equal(e.type, "exceed_context_size_error");
          assert.equal(e.n_ctx, LLAMA_SLOT_CTX);
          assert.ok(e.n_prompt_tokens > LLAMA_SLOT_CTX);

          const err = await openai.chat.completions.create({
            ...tooLong,
            stream,
          }).then(() => null, (x: unknown) => x);
          assert.ok(err instanceof OpenAI.BadRequestError, `got ${err}`);
          assert.equal(err.status, 400);
          assert.match(err.message, /exceeds the available context size/);
        },
      );
    }
  });
});
