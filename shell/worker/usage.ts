// Token accounting from a backend's `usage` object, for response_complete. Maps
// OpenAI (prompt_tokens/completion_tokens/total_tokens) and Anthropic or the
// Responses API (input_tokens/output_tokens). Pure.
import type { TokenCounts } from "../../core/protocol/mod.ts";

type Partial3 = {
  prompt: number | null;
  completion: number | null;
  total: number | null;
};

function count(v: unknown): number | null {
  return typeof v === "number" && Number.isInteger(v) && v >= 0 &&
      v <= 0xffff_ffff
    ? v
    : null;
}

function mergeUsage(into: Partial3, usage: unknown): void {
  if (typeof usage !== "object" || usage === null) return;
  const u = usage as Record<string, unknown>;
  into.prompt = count(u.prompt_tokens) ?? count(u.input_tokens) ?? into.prompt;
  into.completion = count(u.completion_tokens) ?? count(u.output_tokens) ??
    into.completion;
  into.total = count(u.total_tokens) ?? into.total;
}

function toCounts(p: Partial3): TokenCounts | null {
  if (p.prompt === null && p.completion === null && p.total === null) {
    return null;
  }
  const total = p.total ??
    (p.prompt !== null && p.completion !== null
      ? p.prompt + p.completion
      : null);
  return {
    prompt_tokens: p.prompt,
    completion_tokens: p.completion,
    total_tokens: total,
  };
}

/** Token counts of a non-streaming JSON answer, or null when it has no usage. */
export function tokenCountsFromBody(body: string): TokenCounts | null {
  if (!body.includes('"usage"')) return null;
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return null;
  }
  const p: Partial3 = { prompt: null, completion: null, total: null };
  if (typeof value === "object" && value !== null) {
    mergeUsage(p, (value as Record<string, unknown>).usage);
  }
  return toCounts(p);
}

/**
 * Usage carried inside an SSE stream: OpenAI's final usage chunk, Anthropic's
 * message_start and message_delta, the Responses API's response.completed. Only
 * lines mentioning "usage" are parsed, so the per-chunk cost is a substring scan.
 */
export type UsageScan = { carry: string; counts: Partial3 };

const CARRY_MAX = 1 << 20; // A longer unterminated line is not an SSE usage event.

export function newUsageScan(): UsageScan {
  return { carry: "", counts: { prompt: null, completion: null, total: null } };
}

export function scanChunk(scan: UsageScan, text: string): void {
  const joined = scan.carry + text;
  const end = joined.lastIndexOf("\n");
  scan.carry = joined.slice(end + 1);
  if (scan.carry.length > CARRY_MAX) scan.carry = "";
  if (end === -1 || !joined.includes('"usage"')) return;
  scanLines(scan.counts, joined.slice(0, end));
}

/**
 * scanChunk over bytes (chunk-bytes-v1, issue 18): the same lines, found with
 * native byte searches; only a piece mentioning "usage" is decoded.
 */
export type UsageByteScan = { carry: Buffer; counts: Partial3 };

const USAGE_BYTES = Buffer.from('"usage"');
const NO_BYTES = Buffer.alloc(0);

/**
 * Horspool's skip table for USAGE_BYTES: how far the search may jump when the
 * byte under the needle's last position is b.
 */
const USAGE_SKIP = (() => {
  const skip = new Uint8Array(256).fill(USAGE_BYTES.length);
  for (let i = 0; i < USAGE_BYTES.length - 1; i++) {
    skip[USAGE_BYTES[i]!] = USAGE_BYTES.length - 1 - i;
  }
  return skip;
})();

/**
 * Where `"usage"` starts in bytes, or -1. Buffer.indexOf would do, but Deno's
 * node:buffer searches in JavaScript at ~5 ns a byte (0.8 µs for one SSE
 * event, measured): this skips ahead up to 7 bytes at a time (issue 18).
 * Only `bytes[0, end)` is searched (no subarray per read, issue 31).
 */
export function indexOfUsage(
  bytes: Uint8Array,
  end: number = bytes.length,
): number {
  const n = USAGE_BYTES.length;
  const last = n - 1;
  for (let at = 0; at + n <= end;) {
    const tail = bytes[at + last]!;
    if (tail === 0x22) {
      let i = last - 1;
      while (i >= 0 && bytes[at + i] === USAGE_BYTES[i]) i--;
      if (i < 0) return at;
    }
    at += USAGE_SKIP[tail]!;
  }
  return -1;
}

export function newUsageByteScan(): UsageByteScan {
  return {
    carry: NO_BYTES,
    counts: { prompt: null, completion: null, total: null },
  };
}

export function scanBytes(scan: UsageByteScan, bytes: Buffer): void {
  const joined = scan.carry.length === 0
    ? bytes
    : Buffer.concat([scan.carry, bytes]);
  // Uint8Array's own lastIndexOf: a V8 builtin (Buffer's goes through Deno's
  // JavaScript search).
  const end = Uint8Array.prototype.lastIndexOf.call(joined, 0x0a);
  // A copy: the carry must not pin the read it came from.
  scan.carry = end === joined.length - 1 ||
      joined.length - end - 1 > CARRY_MAX
    ? NO_BYTES
    : Buffer.from(joined.subarray(end + 1));
  if (end === -1 || indexOfUsage(joined, end) === -1) return;
  scanLines(scan.counts, joined.toString("utf8", 0, end));
}

export function scanBytesResult(scan: UsageByteScan): TokenCounts | null {
  return toCounts(scan.counts);
}

/** Merges the usage of every `data:` line of `text` that mentions it. */
function scanLines(counts: Partial3, text: string): void {
  for (const line of text.split("\n")) {
    if (!line.startsWith("data:") || !line.includes('"usage"')) continue;
    try {
      const event = JSON.parse(line.slice(5)) as Record<string, unknown>;
      mergeUsage(counts, event.usage);
      mergeUsage(
        counts,
        (event.message as Record<string, unknown> | undefined)?.usage,
      );
      mergeUsage(
        counts,
        (event.response as Record<string, unknown> | undefined)?.usage,
      );
    } catch {
      // Not JSON: not ours to judge, the bytes were forwarded as they were.
    }
  }
}

export function scanResult(scan: UsageScan): TokenCounts | null {
  return toCounts(scan.counts);
}

/**
 * The end of a body sent in pieces: where a JSON answer keeps its `usage`
 * (OpenAI and Anthropic put it last), without holding the whole body.
 */
export type UsageTail = { text: string };
const TAIL_CHARS = 8 * 1024;

export function newUsageTail(): UsageTail {
  return { text: "" };
}

export function keepTail(tail: UsageTail, text: string): void {
  tail.text = (tail.text + text.slice(-TAIL_CHARS)).slice(-TAIL_CHARS);
}

/** Token counts from the last `"usage": {...}` object in `tail`, or null. */
export function tokenCountsFromTail(tail: string): TokenCounts | null {
  const at = tail.lastIndexOf('"usage"');
  const open = at === -1 ? -1 : tail.indexOf("{", at);
  if (open === -1) return null;
  let depth = 0;
  for (let i = open; i < tail.length; i++) {
    const c = tail[i];
    if (c === "{") depth++;
    else if (c === "}" && --depth === 0) {
      try {
        const p: Partial3 = { prompt: null, completion: null, total: null };
        mergeUsage(p, JSON.parse(tail.slice(open, i + 1)));
        return toCounts(p);
      } catch {
        return null;
      }
    }
  }
  return null;
}
