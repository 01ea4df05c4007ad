// The mock backend's other endpoints (issue 25): embeddings, rerank, audio,
// token counting, llama-server's /tokenize, and an echo, each answering
// something a test can check byte for byte through the relay.
//
//   POST /v1/embeddings        vectors derived from each input's text (float,
//                              or base64 float32 LE with encoding_format)
//   POST /v1/rerank, /rerank   documents scored by shared words with the query
//   POST /v1/audio/transcriptions  {"text": "sha256:<hex of the request body>"}:
//                              the multipart bytes exactly as received
//   POST /v1/audio/speech      SPEECH_BYTES (64 KiB, not UTF-8), audio/mpeg
//   POST /v1/messages/count_tokens  {"input_tokens": words in the messages}
//   POST /tokenize             {"tokens": [one per word]}
//   ANY  /v1/mock/echo         the request's body back with its content type,
//                              method in x-mock-method
import { Buffer } from "node:buffer";
import { json } from "./respond.ts";

/** 64 KiB of audio stand-in: a fixed pattern that is not valid UTF-8. */
export const SPEECH_BYTES: Uint8Array = (() => {
  const out = new Uint8Array(64 * 1024);
  for (let i = 0; i < out.length; i++) out[i] = (i * 131 + 0xc3) & 0xff;
  out[0] = 0xff; // never valid in UTF-8
  return out;
})();

/** The vector the mock gives a text: 8 numbers from its characters. */
export function mockVector(text: string): number[] {
  const v = [0, 0, 0, 0, 0, 0, 0, 0];
  for (let i = 0; i < text.length; i++) {
    v[i % 8]! += ((text.charCodeAt(i) * (i + 1)) % 97) / 97;
  }
  return v.map((x) => Math.fround(x / Math.max(1, text.length)));
}

function float32Base64(v: number[]): string {
  const f = new Float32Array(v);
  return Buffer.from(f.buffer).toString("base64");
}

async function bodyJson(req: Request): Promise<Record<string, unknown>> {
  try {
    const v: unknown = JSON.parse(await req.text());
    return typeof v === "object" && v !== null
      ? v as Record<string, unknown>
      : {};
  } catch {
    return {};
  }
}

function words(value: unknown): string[] {
  return JSON.stringify(value ?? "").match(/[A-Za-z0-9]+/g) ?? [];
}

async function embeddings(req: Request): Promise<Response> {
  const body = await bodyJson(req);
  const inputs = Array.isArray(body.input) ? body.input : [body.input];
  const base64 = body.encoding_format === "base64";
  let tokens = 0;
  const data = inputs.map((input, index) => {
    const text = String(input ?? "");
    tokens += words(text).length;
    const v = mockVector(text);
    return {
      object: "embedding",
      index,
      embedding: base64 ? float32Base64(v) : v,
    };
  });
  return json(200, {
    object: "list",
    data,
    model: body.model,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  });
}

async function rerank(req: Request): Promise<Response> {
  const body = await bodyJson(req);
  const query = new Set(words(body.query));
  const docs = Array.isArray(body.documents) ? body.documents : [];
  const results = docs.map((d, index) => ({
    index,
    relevance_score: words(d).filter((w) => query.has(w)).length,
  })).sort((a, b) => b.relevance_score - a.relevance_score);
  return json(200, { model: body.model, results });
}

async function sha256Hex(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0"))
    .join("");
}

/** The answer for an issue-25 path, or null when `path` is not one of them. */
export function otherEndpoint(
  req: Request,
  path: string,
): Promise<Response> | null {
  if (path === "/v1/mock/echo") return echo(req);
  if (req.method !== "POST") return null;
  switch (path) {
    case "/v1/embeddings":
      return embeddings(req);
    case "/v1/rerank":
    case "/rerank":
      return rerank(req);
    case "/v1/audio/transcriptions":
      return (async () => {
        const bytes = new Uint8Array(await req.arrayBuffer());
        return json(200, { text: `sha256:${await sha256Hex(bytes)}` });
      })();
    case "/v1/audio/speech":
      return (async () => {
        await req.body?.cancel();
        return new Response(SPEECH_BYTES.slice(), {
          headers: { "content-type": "audio/mpeg" },
        });
      })();
    case "/v1/messages/count_tokens":
      return (async () =>
        json(200, {
          input_tokens: words((await bodyJson(req)).messages).length,
        }))();
    case "/tokenize":
      return (async () =>
        json(200, {
          tokens: words((await bodyJson(req)).content).map((_, i) => i + 1),
        }))();
    default:
      return null;
  }
}

async function echo(req: Request): Promise<Response> {
  const bytes = new Uint8Array(await req.arrayBuffer());
  return new Response(bytes, {
    headers: {
      "content-type": req.headers.get("content-type") ??
        "application/octet-stream",
      "x-mock-method": req.method,
    },
  });
}
