// Issue 25, "every endpoint a client calls", with real processes and the
// official SDKs: the mock backend (mock/endpoints.ts), the server and our
// workers, plus an in-process worker of the original dialect. Each answer is
// compared with the same call made directly to the backend.
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import OpenAI, { toFile } from "openai";
import { mockVector, SPEECH_BYTES } from "../mock/endpoints.ts";
import type { MockBackendStats } from "../mock/backend.ts";
import { type Child, stopInReverse, waitUntil } from "../shell/procs.ts";
import { workersConnected } from "../shell/demo/relay_probes.ts";
import {
  startMockProcess,
  startServerProcess,
  startWorkerProcess,
} from "../shell/demo/cluster.ts";
import { startOriginalWorker } from "./_original_worker.ts";
import { anthropicAt, openaiAt } from "./_sdk.ts";

const SECRET = "e2e-endpoints";
const MODEL = "mock-model";
const MODELS = [MODEL, "whisper-1", "tts-1"];

type Mock = { url: string; child: Child; stats(): Promise<MockBackendStats> };

async function mock(started: Child[]): Promise<Mock> {
  const m = await startMockProcess({
    script: "e2e/_mock_with_stats.ts",
    delayMs: 1,
    models: MODELS,
  });
  started.push(m.child);
  const statsUrl = (await m.child.waitForLine(/stats on (\S+)/))[1]!;
  return {
    url: m.url,
    child: m.child,
    stats: async () => await (await fetch(statsUrl)).json(),
  };
}

async function server(started: Child[], env: Record<string, string> = {}) {
  const s = await startServerProcess({
    secret: SECRET,
    env: { TICK_MS: "20", ...env },
  });
  started.push(s.child);
  return s.url;
}

async function worker(
  started: Child[],
  serverUrl: string,
  backendUrl: string,
  name: string,
  env: Record<string, string> = {},
): Promise<void> {
  started.push(
    await startWorkerProcess({
      name,
      serverUrl,
      secret: SECRET,
      backendUrl,
      env: { MODELS: MODELS.join(","), ...env },
    }),
  );
}

async function stopAll(started: Child[]): Promise<void> {
  await stopInReverse(started);
}

function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** 200 KiB that is not UTF-8 (every byte value, repeated). */
function audioFile(): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(200 * 1024);
  for (let i = 0; i < out.length; i++) out[i] = (i * 7 + (i >> 8)) & 0xff;
  return out;
}

/** A fetch for the SDK that keeps a copy of every request body it sends. */
function capturingFetch() {
  const captured: Uint8Array[] = [];
  const capturing: typeof fetch = async (input, init) => {
    const req = new Request(input, init);
    captured.push(new Uint8Array(await req.clone().arrayBuffer()));
    return await fetch(req);
  };
  return { captured, capturing };
}

Deno.test("issue 25: every /v1 endpoint through the relay with the official SDKs", async (t) => {
  const started: Child[] = [];
  try {
    const backend = await mock(started);
    const url = await server(started, {
      MODEL_ALIASES:
        "text-embedding-3-small=mock-model,gpt-4o-mini=mock-model,whisper-large=whisper-1",
      FORWARD_PATH_PREFIXES: "/tokenize",
    });
    await worker(started, url, backend.url, "ours");
    await waitUntil(
      "worker registered",
      async () => (await workersConnected(url)) === 1,
    );
    const relay = openaiAt(url);
    const direct = openaiAt(backend.url);
    const inputs = Array.from({ length: 64 }, (_, i) => `short input ${i}`);

    await t.step(
      "embeddings, float and the SDK's default base64: vectors identical to direct",
      async () => {
        for (const encoding of ["float", undefined] as const) {
          const req = {
            model: MODEL,
            input: ["hello relay", "second"],
            ...(encoding === undefined ? {} : { encoding_format: encoding }),
          };
          const via = await relay.embeddings.create(req);
          const own = await direct.embeddings.create(req);
          assert.deepEqual(via.data, own.data);
          assert.deepEqual(
            via.data[0]!.embedding,
            mockVector("hello relay").map(Math.fround),
          );
        }
      },
    );

    await t.step("embeddings: a 64-input batch", async () => {
      const via = await relay.embeddings.create({
        model: MODEL,
        input: inputs,
      });
      const own = await direct.embeddings.create({
        model: MODEL,
        input: inputs,
      });
      assert.equal(via.data.length, 64);
      assert.deepEqual(via, own);
    });

    await t.step("anthropic messages.countTokens", async () => {
      const anthropic = anthropicAt(url);
      const r = await anthropic.messages.countTokens({
        model: MODEL,
        messages: [{ role: "user", content: "count these five words" }],
      });
      assert.ok(r.input_tokens > 0, JSON.stringify(r));
      const own =
        await (await fetch(`${backend.url}/v1/messages/count_tokens`, {
          method: "POST",
          body: JSON.stringify({
            model: MODEL,
            messages: [{ role: "user", content: "count these five words" }],
          }),
        })).json();
      assert.equal(r.input_tokens, own.input_tokens);
    });

    await t.step(
      "audio.transcriptions.create with 200 KiB: the backend receives the identical multipart bytes",
      async () => {
        const { captured, capturing } = capturingFetch();
        const file = audioFile();
        const r = await openaiAt(url, { fetch: capturing }).audio.transcriptions
          .create({
            model: "whisper-1",
            file: await toFile(file, "speech.wav", { type: "audio/wav" }),
          });
        // The SDK's first call is a bodiless probe; the upload is the one with a body.
        const sent = captured.find((b) => b.length > 0)!;
        assert.ok(sent.length > file.length);
        assert.equal(r.text, `sha256:${sha256(sent)}`);
      },
    );

    await t.step(
      "audio.transcriptions.create with an alias: the backend receives the target's name in the multipart model field, every other byte unchanged",
      async () => {
        const { captured, capturing } = capturingFetch();
        const file = audioFile();
        const r = await openaiAt(url, { fetch: capturing }).audio.transcriptions
          .create({
            model: "whisper-large",
            file: await toFile(file, "speech.wav", { type: "audio/wav" }),
          });
        const sent = Buffer.from(captured.find((b) => b.length > 0)!);
        // What the backend should get: the SDK's bytes with only the model
        // field's value replaced (latin1 keeps every byte as one character).
        const field = 'name="model"\r\n\r\n';
        const text = sent.toString("latin1");
        assert.equal(text.split(`${field}whisper-large\r\n`).length, 2);
        const expected = Buffer.from(
          text.replace(`${field}whisper-large\r\n`, `${field}whisper-1\r\n`),
          "latin1",
        );
        assert.equal(expected.length, sent.length - 4);
        assert.equal(r.text, `sha256:${sha256(expected)}`);
      },
    );

    await t.step(
      "audio.speech.create: 64 KiB that is not UTF-8 arrives identical",
      async () => {
        const r = await relay.audio.speech.create({
          model: "tts-1",
          voice: "alloy",
          input: "hello",
        });
        assert.equal(r.headers.get("content-type"), "audio/mpeg");
        const bytes = new Uint8Array(await r.arrayBuffer());
        assert.equal(bytes.length, 64 * 1024);
        assert.deepEqual(bytes, SPEECH_BYTES);
      },
    );

    await t.step(
      "models.retrieve: a served model, an alias, and 404 for nobody's",
      async () => {
        const m = await relay.models.retrieve(MODEL);
        assert.equal(m.id, MODEL);
        assert.equal(m.object, "model");
        const alias = await relay.models.retrieve("gpt-4o-mini");
        assert.equal(alias.id, "gpt-4o-mini");
        await assert.rejects(
          relay.models.retrieve("nobody-serves-this"),
          (e: unknown) => e instanceof OpenAI.NotFoundError,
        );
        const list = await relay.models.list();
        const ids = list.data.map((x) => x.id);
        assert.ok(ids.includes("text-embedding-3-small"), ids.join(","));
      },
    );

    await t.step("POST /v1/rerank", async () => {
      const body = JSON.stringify({
        model: MODEL,
        query: "fox jumps",
        documents: ["a lazy dog", "the fox jumps high", "fox"],
      });
      const via = await fetch(`${url}/v1/rerank`, { method: "POST", body });
      const own = await fetch(`${backend.url}/v1/rerank`, {
        method: "POST",
        body,
      });
      assert.equal(via.status, 200);
      assert.deepEqual(await via.json(), await own.json());
    });

    await t.step(
      "a body that is not JSON (text and not-UTF-8 bytes) routed by X-Model, and a GET",
      async () => {
        const text = "plain text, not JSON: ünïcödé";
        const r1 = await fetch(`${url}/v1/mock/echo`, {
          method: "POST",
          headers: { "x-model": MODEL, "content-type": "text/plain" },
          body: text,
        });
        assert.equal(r1.status, 200);
        assert.equal(await r1.text(), text);
        const bytes = audioFile().slice(0, 5000);
        const r2 = await fetch(`${url}/v1/mock/echo`, {
          method: "PUT",
          headers: {
            "x-model": MODEL,
            "content-type": "application/octet-stream",
          },
          body: bytes,
        });
        assert.equal(r2.headers.get("x-mock-method"), "PUT");
        assert.deepEqual(new Uint8Array(await r2.arrayBuffer()), bytes);
        const r3 = await fetch(`${url}/v1/mock/echo`, {
          headers: { "x-model": MODEL },
        });
        assert.equal(r3.status, 200);
        assert.equal((await r3.arrayBuffer()).byteLength, 0);
      },
    );

    await t.step(
      "no model: 400 model_required, never reaching a backend",
      async () => {
        const before = (await backend.stats()).requests;
        for (const path of ["/v1/embeddings", "/v1/chat/completions"]) {
          const r = await fetch(`${url}${path}`, {
            method: "POST",
            body: JSON.stringify({ input: "x" }),
          });
          assert.equal(r.status, 400);
          const e = await r.json();
          assert.equal(e.error.code, "model_required");
          assert.equal(typeof e.error.message, "string");
        }
        const g = await fetch(`${url}/v1/files`);
        assert.equal(g.status, 400);
        assert.equal((await g.json()).error.code, "model_required");
        assert.equal((await backend.stats()).requests, before);
      },
    );

    await t.step(
      "aliases: routed as the target, the backend receives the target's name",
      async () => {
        const via = await relay.embeddings.create({
          model: "text-embedding-3-small",
          input: "aliased",
          encoding_format: "float",
        });
        assert.equal(via.model, MODEL);
        assert.deepEqual(via.data[0]!.embedding, mockVector("aliased"));
      },
    );

    await t.step(
      "/tokenize is forwarded because FORWARD_PATH_PREFIXES lists it; /detokenize is not",
      async () => {
        const r = await fetch(`${url}/tokenize`, {
          method: "POST",
          headers: { "x-model": MODEL },
          body: JSON.stringify({ content: "three little words" }),
        });
        assert.equal(r.status, 200);
        assert.deepEqual(await r.json(), { tokens: [1, 2, 3] });
        const d = await fetch(`${url}/detokenize`, {
          method: "POST",
          headers: { "x-model": MODEL },
          body: "{}",
        });
        assert.equal(d.status, 404);
        await d.body?.cancel();
        const h = await fetch(`${url}/health`, { method: "POST" });
        assert.notEqual(h.status, 200);
        await h.body?.cancel();
      },
    );
  } finally {
    await stopAll(started);
  }
});

Deno.test("issue 25: two workers with different ENDPOINT_PREFIXES for one model each receive only their paths", async () => {
  const started: Child[] = [];
  try {
    const embeddingsBackend = await mock(started);
    const chatBackend = await mock(started);
    const url = await server(started);
    await worker(started, url, embeddingsBackend.url, "emb", {
      ENDPOINT_PREFIXES: "/v1/embeddings,/v1/rerank",
    });
    await worker(started, url, chatBackend.url, "chat", {
      ENDPOINT_PREFIXES: "/v1/chat/",
    });
    await waitUntil(
      "both workers registered",
      async () => (await workersConnected(url)) === 2,
    );
    const relay = openaiAt(url);
    for (let i = 0; i < 4; i++) {
      await relay.embeddings.create({ model: MODEL, input: `e${i}` });
      await relay.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 2,
      });
    }
    const e = await embeddingsBackend.stats();
    const c = await chatBackend.stats();
    assert.deepEqual(e.paths, Array(4).fill("/v1/embeddings"));
    assert.equal(e.requests, 4);
    assert.deepEqual(c.paths, []); // chat routes are not in `paths`...
    assert.equal(c.requests, 4); // ...but counted: four chat requests.
    // No worker takes /v1/audio/speech for this model: 404 as for an unknown model.
    const r = await fetch(`${url}/v1/audio/speech`, {
      method: "POST",
      body: JSON.stringify({ model: MODEL, input: "x", voice: "alloy" }),
    });
    assert.equal(r.status, 404);
    assert.equal((await r.json()).error.code, "model_not_found");
  } finally {
    await stopAll(started);
  }
});

Deno.test("issue 25: a worker of the original dialect (no extensions) serves embeddings; a body that is not text gets a clear 501", async () => {
  const started: Child[] = [];
  const backend = await mock(started);
  const url = await server(started);
  const original = startOriginalWorker({
    serverUrl: url,
    secret: SECRET,
    backendUrl: backend.url,
    models: MODELS,
  });
  try {
    const ack = await original.ack;
    assert.equal("extensions" in ack, false);
    assert.equal("endpoint_prefixes" in ack, false);
    const relay = openaiAt(url);
    const direct = openaiAt(backend.url);
    const inputs = ["one", "two", "three"];
    for (const encoding of ["float", "base64"] as const) {
      const via = await relay.embeddings.create({
        model: MODEL,
        input: inputs,
        encoding_format: encoding,
      });
      const own = await direct.embeddings.create({
        model: MODEL,
        input: inputs,
        encoding_format: encoding,
      });
      assert.deepEqual(via.data, own.data);
    }
    assert.equal(original.requests[0]!.method, "POST");
    assert.equal(original.requests[0]!.endpoint_path, "/v1/embeddings");
    const r = await fetch(`${url}/v1/audio/transcriptions`, {
      method: "POST",
      headers: { "x-model": "whisper-1", "content-type": "audio/wav" },
      body: audioFile(),
    });
    assert.equal(r.status, 501);
    const e = await r.json();
    assert.equal(e.error.code, "binary_body_unsupported");
    assert.match(e.error.message, /body-bytes-v1/);
  } finally {
    await original.close();
    await stopAll(started);
  }
});
