// What a finished request used (issue 26): the backend's own counts wherever its
// answer carried `usage` (the worker reads them into response_complete's
// `token_counts`), else, for a chat or completions stream that did not ask for
// usage, the number of content deltas streamed as the completion tokens and
// the prompt estimated from the body's text (issue 33), marked estimated. Counting only reads the chunks: the client gets every byte as is.
import type { CacheReport, TokenUsage } from "../effect.ts";
import type { TokenCounts } from "../protocol/messages.ts";
import type { ChunkData } from "../vocabulary.ts";
import type { Request } from "./state.ts";

/** Where each streamed delta carries its text: chat `delta.content`, completions `text`. */
const DELTA_FIELD: Record<string, string> = {
  "/v1/chat/completions": '"content":',
  "/v1/completions": '"text":',
};

/**
 * What the relay reads from a request's JSON body for token accounting (issue
 * 33), computed once where the body is parsed (tokenAskOf) and carried on
 * requestReceived.
 */
export type TokenAsk = {
  /**
   * The parsed `stream_options.include_usage` is true: the backend's stream
   * ends with a usage chunk. Nothing else in the body counts (a
   * `"metadata":{"include_usage":true}` is not an ask).
   */
  usageAsked: boolean;
  /** The prompt's tokens, estimated from its text (PROMPT_CHARS_PER_TOKEN). */
  promptEstimate: number;
  /** `max_tokens`, `max_completion_tokens` or `max_output_tokens`; null = none given. */
  maxTokens: number | null;
};

/** What a request without a parsed body asks: nothing known. */
export const NO_TOKEN_ASK: TokenAsk = {
  usageAsked: false,
  promptEstimate: 0,
  maxTokens: null,
};

/**
 * Characters of prompt text per token, for the estimate: the usual rule of
 * thumb for BPE vocabularies on English text (a relay has no tokenizer).
 */
export const PROMPT_CHARS_PER_TOKEN = 4;

/** The body fields that hold prompt text, across the four inference APIs. */
const PROMPT_FIELDS = [
  "messages",
  "prompt",
  "input",
  "system",
  "instructions",
  "tools",
] as const;

/** Where a body's completion cap lives: chat, chat (newer name), Responses API. */
const MAX_TOKEN_FIELDS = [
  "max_tokens",
  "max_completion_tokens",
  "max_output_tokens",
] as const;

/** The token facts of a parsed JSON body (see TokenAsk). */
export function tokenAskOf(fields: Record<string, unknown>): TokenAsk {
  const options = fields.stream_options;
  const usageAsked = typeof options === "object" && options !== null &&
    (options as Record<string, unknown>).include_usage === true;
  let chars = 0;
  for (const f of PROMPT_FIELDS) chars += textLength(fields[f], 0);
  let maxTokens: number | null = null;
  for (const f of MAX_TOKEN_FIELDS) {
    const v = fields[f];
    if (typeof v === "number" && Number.isInteger(v) && v >= 0) {
      maxTokens = v;
      break;
    }
  }
  return {
    usageAsked,
    promptEstimate: Math.ceil(chars / PROMPT_CHARS_PER_TOKEN),
    maxTokens,
  };
}

/**
 * Parts that carry media, not text (OpenAI's image_url and input_audio,
 * Anthropic's base64 `source`): their bytes are not prompt characters.
 */
const MEDIA_KEYS: ReadonlySet<string> = new Set([
  "image_url",
  "input_audio",
  "source",
  "file",
  "image",
]);

/** The length of every string in `v` but media (depth-bounded: a body is not trusted). */
function textLength(v: unknown, depth: number): number {
  if (typeof v === "string") return v.length;
  if (typeof v !== "object" || v === null || depth > 16) return 0;
  let n = 0;
  // Issue 31: no array of pairs per object of the body (Object.entries), and
  // an array's items read by index (an index is never a media key; for-in
  // would make a string of each). A parsed body's objects inherit no
  // enumerable key.
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) n += textLength(v[i], depth + 1);
    return n;
  }
  const o = v as Record<string, unknown>;
  for (const k in o) if (!MEDIA_KEYS.has(k)) n += textLength(o[k], depth + 1);
  return n;
}

/**
 * Whether the request's stream is to be counted: a chat or completions stream
 * that did not ask for usage, since only then may the backend's answer carry
 * none (the worker may still add the ask, issue 33: its counts then win).
 */
export function countsDeltas(
  endpointPath: string,
  isStreaming: boolean,
  usageAsked: boolean,
): boolean {
  return isStreaming && DELTA_FIELD[endpointPath] !== undefined &&
    !usageAsked;
}

const encoder = new TextEncoder();

/** A field's bytes and Horspool's skip table for them (how far to jump on each byte). */
type Needle = { bytes: Uint8Array; skip: Uint8Array };

function needle(text: string): Needle {
  const bytes = encoder.encode(text);
  const skip = new Uint8Array(256).fill(bytes.length);
  for (let i = 0; i < bytes.length - 1; i++) {
    skip[bytes[i]!] = bytes.length - 1 - i;
  }
  return { bytes, skip };
}

const DELTA_BYTES: Record<string, Needle> = Object.fromEntries(
  Object.entries(DELTA_FIELD).map(([k, v]) => [k, needle(v)]),
);

const QUOTE = 0x22;
const SPACE = 0x20;

/**
 * The non-empty string values of the route's delta field in `chunk`: each is
 * one content delta (one token, as OpenAI-style servers stream them). A field
 * split across two chunks is missed: an estimate, said so in the record.
 */
export function countDeltas(chunk: ChunkData, endpointPath: string): number {
  return typeof chunk === "string"
    ? countInText(chunk, DELTA_FIELD[endpointPath] ?? '"content":')
    : countInBytes(
      chunk,
      DELTA_BYTES[endpointPath] ?? DELTA_BYTES["/v1/chat/completions"]!,
    );
}

function countInText(text: string, field: string): number {
  let n = 0;
  for (let at = text.indexOf(field); at !== -1; at = text.indexOf(field, at)) {
    at += field.length;
    while (text.charCodeAt(at) === SPACE) at++;
    if (text.charCodeAt(at) === QUOTE && text.charCodeAt(at + 1) !== QUOTE) {
      n++;
    }
  }
  return n;
}

/**
 * countInText over bytes, without decoding: Horspool's search jumps up to the
 * field's length at a time (jumping from quote to quote with the native
 * indexOf measured 1.9 µs a chunk: the bytes[] reads are what cost).
 */
function countInBytes(bytes: Uint8Array, field: Needle): number {
  const f = field.bytes;
  const last = f.length - 1;
  let n = 0;
  for (let at = 0; at + f.length <= bytes.length;) {
    const tail = bytes[at + last]!;
    if (tail === f[last]) {
      let i = last - 1;
      while (i >= 0 && bytes[at + i] === f[i]) i--;
      if (i < 0) {
        let v = at + f.length;
        while (bytes[v] === SPACE) v++;
        if (bytes[v] === QUOTE && bytes[v + 1] !== QUOTE) n++;
        at = v;
        continue;
      }
    }
    at += field.skip[tail]!;
  }
  return n;
}

/** The usage record of a request as it ends. */
export function usageOf(
  request: Request,
  counts: TokenCounts | null,
  cacheReport: CacheReport | null,
): TokenUsage {
  const cached = cacheReport?.hit === true ? cacheReport.tokensReused : null;
  if (counts !== null) {
    const prompt = counts.prompt_tokens ?? null;
    const total = counts.total_tokens ?? null;
    const completion = counts.completion_tokens ??
      (total !== null && prompt !== null ? total - prompt : null);
    return { prompt, completion, cached, estimated: false };
  }
  if (request.deltas !== null && request.deltas > 0) {
    // Issue 33: the prompt of an estimated stream is estimated too.
    return {
      prompt: request.promptEstimate > 0 ? request.promptEstimate : null,
      completion: request.deltas,
      cached,
      estimated: true,
    };
  }
  return { prompt: null, completion: null, cached, estimated: false };
}

/** What a limit counts of a usage: prompt plus completion, the unknown as 0. */
export function tokensOf(usage: TokenUsage): number {
  return (usage.prompt ?? 0) + (usage.completion ?? 0);
}

/** The usage of a request that never reached a backend. */
export const NO_USAGE: TokenUsage = {
  prompt: null,
  completion: null,
  cached: null,
  estimated: false,
};
