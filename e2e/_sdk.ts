// The official SDK clients an end-to-end test points at the relay (or straight
// at a backend, to compare). No retries: a success must be the relay's own
// (its requeue), never an SDK retry; 20 s unless a test waits longer on purpose.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

export type SdkOptions = {
  /** The API key sent; "unused" where the relay asks for none. */
  apiKey?: string;
  timeoutMs?: number;
  /** A fetch that sees every request, where a test checks what the SDK sent. */
  fetch?: typeof fetch;
};

/** The OpenAI client for `origin` (its /v1 routes). */
export function openaiAt(origin: string, o: SdkOptions = {}): OpenAI {
  return new OpenAI({
    baseURL: `${origin}/v1`,
    apiKey: o.apiKey ?? "unused",
    maxRetries: 0,
    timeout: o.timeoutMs ?? 20_000,
    ...(o.fetch === undefined ? {} : { fetch: o.fetch }),
  });
}

/** The Anthropic client for `origin` (it adds /v1 itself). */
export function anthropicAt(origin: string, o: SdkOptions = {}): Anthropic {
  return new Anthropic({
    baseURL: origin,
    apiKey: o.apiKey ?? "unused",
    maxRetries: 0,
    timeout: o.timeoutMs ?? 20_000,
  });
}

/**
 * A chat completion stream's text, its content deltas joined in order;
 * `onChunk` hears the text so far after each chunk (a test acting mid-stream).
 */
export async function streamedText(
  stream: AsyncIterable<OpenAI.ChatCompletionChunk>,
  onChunk?: (textSoFar: string) => void | Promise<void>,
): Promise<string> {
  let text = "";
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? "";
    await onChunk?.(text);
  }
  return text;
}
