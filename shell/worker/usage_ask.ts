// Issue 33: exact usage for streams whose client did not ask for it. Where the
// backend is one whose answer stays byte for byte what it would have sent
// without the ask, the worker adds `stream_options.include_usage` to the body,
// reads the usage-only chunk the backend then sends before `[DONE]`, and takes
// that chunk out of what goes to the relay. Checked per backend (docs/decisions.md
// C150):
//
// - llama-server (checked with the real binary): chat streams end with a
//   `"choices":[]` usage chunk; the only other change is that the final chunk's
//   `timings` move onto the usage chunk, so they are put back where they were.
//   Completions streams carry usage in their last chunk unasked: nothing to add.
// - vLLM (serving_chat.py / serving_completion.py): chunks are dumped with
//   exclude_unset, so the ask adds only the `"choices":[]` usage chunk, on chat
//   and completions alike.
// - Ollama (middleware/openai.go): chat only adds the usage chunk (chunks
//   marshal `usage` with omitempty), so chat is asked; completions puts a
//   zeroed `usage` on every chunk once asked, so completions are not.
// - Anything else (OpenAI's own API puts `"usage":null` on every chunk): not
//   asked; the relay estimates.
import { Buffer, isUtf8 } from "node:buffer";

/** A backend whose streams stay exact with the ask (see above). */
export type UsageAskFlavour = "llama-server" | "vllm" | "ollama";

/**
 * The flavour of a backend the lifecycle adapter detected (lifecycle/backends.ts:
 * llama-server by its /props, Ollama by its /api/tags), or null.
 */
export function flavourOfKind(kind: string): UsageAskFlavour | null {
  if (kind === "llama-server") return "llama-server";
  if (kind === "ollama") return "ollama";
  return null;
}

/** The flavour named by a GET /v1/models answer's `owned_by` (vLLM: "vllm", llama-server: "llamacpp"), or null. */
export function flavourOf(models: unknown): UsageAskFlavour | null {
  const data = (models as { data?: unknown } | null)?.data;
  if (!Array.isArray(data) || data.length === 0) return null;
  const owners = new Set(
    data.map((m) => (m as { owned_by?: unknown } | null)?.owned_by),
  );
  if (owners.size !== 1) return null;
  const [owner] = owners;
  if (owner === "llamacpp") return "llama-server";
  if (owner === "vllm") return "vllm";
  return null;
}

/** Whether the worker adds the ask for this backend and route. */
export function asksUsageOn(
  flavour: UsageAskFlavour | null,
  endpointPath: string,
): boolean {
  switch (flavour) {
    case "llama-server":
    case "ollama":
      return endpointPath === "/v1/chat/completions";
    case "vllm":
      return endpointPath === "/v1/chat/completions" ||
        endpointPath === "/v1/completions";
    case null:
      return false;
  }
}

const ASK = '"stream_options":{"include_usage":true},';

/**
 * The body with the ask added as its first member, or null when it is not to
 * be added: not a JSON object streaming, or `stream_options` already there
 * (the client's own options are never rewritten).
 */
export function withUsageAsk(body: string): string | null {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return null;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return null;
  }
  const obj = value as Record<string, unknown>;
  if (obj.stream !== true || Object.hasOwn(obj, "stream_options")) return null;
  const open = body.indexOf("{");
  // A streaming object has at least `stream`: the comma after the ask is valid.
  return body.slice(0, open + 1) + ASK + body.slice(open + 1);
}

/**
 * Takes the usage-only chunk out of a stream of whole SSE events (text), and
 * gives its extra members back to the event before it (llama-server's
 * `timings`). The final event with a `finish_reason` is held until the next
 * event shows whether one follows. `onUsage` gets the removed event.
 */
export type UsageStrip = {
  pass(text: string): string;
  end(): string;
  /** Whether an event is held back. */
  holding(): boolean;
};

export function newUsageStrip(onUsage: (event: string) => void): UsageStrip {
  let held: string | null = null;
  const take = (event: string): string => {
    let out = "";
    if (held !== null) {
      const extras = isUsageOnly(event) ? extrasAfterUsage(event) : null;
      if (extras !== null) {
        onUsage(event);
        const merged = withExtras(held, extras);
        held = null;
        return merged;
      }
      out = held;
      held = null;
    }
    if (isUsageOnly(event)) {
      onUsage(event);
      return out;
    }
    if (FINISHED.test(event)) {
      held = event;
      return out;
    }
    return out + event;
  };
  return {
    pass(text) {
      let out = "";
      for (const event of events(text)) out += take(event);
      return out;
    },
    end() {
      const rest = held ?? "";
      held = null;
      return rest;
    },
    holding: () => held !== null,
  };
}

/** A chunk that ends a choice: `"finish_reason":"…"` (not null). */
const FINISHED = /"finish_reason"\s*:\s*"/;

/** `text` cut after each blank line (whole events in, whole events out). */
function events(text: string): string[] {
  const out: string[] = [];
  let from = 0;
  for (;;) {
    const at = text.indexOf("\n\n", from);
    if (at === -1) break;
    out.push(text.slice(from, at + 2));
    from = at + 2;
  }
  if (from < text.length) out.push(text.slice(from));
  return out;
}

/** The event's `data:` JSON text, if it is one `data:` line. */
function dataOf(event: string): string | null {
  if (!event.startsWith("data:")) return null;
  const json = event.slice(5).trim();
  return json.includes("\n") ? null : json;
}

function isUsageOnly(event: string): boolean {
  const json = dataOf(event);
  if (json === null || !json.includes('"usage"')) return false;
  try {
    const v = JSON.parse(json) as Record<string, unknown>;
    return Array.isArray(v.choices) && v.choices.length === 0 &&
      typeof v.usage === "object" && v.usage !== null;
  } catch {
    return false;
  }
}

/**
 * The members after `usage` in a usage-only event's JSON, as its bytes (`,"timings":{…}`),
 * "" when usage is last; null when they cannot be told apart.
 */
function extrasAfterUsage(event: string): string | null {
  const json = dataOf(event)!;
  const key = json.indexOf('"usage"');
  const open = json.indexOf("{", key);
  const close = objectEnd(json, open);
  if (close === -1) return null;
  return json.slice(close + 1, json.length - 1);
}

/** Where the JSON object opening at `open` closes, or -1. */
function objectEnd(json: string, open: number): number {
  let depth = 0;
  let inString = false;
  for (let i = open; i < json.length; i++) {
    const c = json[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{") depth++;
    else if (c === "}" && --depth === 0) return i;
  }
  return -1;
}

/** `event` with `extras` put back as its JSON's last members. */
function withExtras(event: string, extras: string): string {
  if (extras === "") return event;
  const close = event.lastIndexOf("}");
  return event.slice(0, close) + extras + event.slice(close);
}

/**
 * newUsageStrip over bytes (chunk-bytes-v1): a read with no finished choice,
 * no usage and nothing held passes untouched; the few others are decoded (an
 * invalid UTF-8 read is passed as is, after what is held).
 */
export type UsageByteStrip = {
  pass(bytes: Buffer): Buffer;
  end(): Buffer;
};

const FINISH_BYTES = Buffer.from('"finish_reason"');
const USAGE_BYTES = Buffer.from('"usage"');

export function newUsageByteStrip(
  onUsage: (event: string) => void,
): UsageByteStrip {
  const text = newUsageStrip(onUsage);
  return {
    pass(bytes) {
      const plain = bytes.indexOf(FINISH_BYTES) === -1 &&
        bytes.indexOf(USAGE_BYTES) === -1;
      if (plain && !text.holding()) return bytes;
      if (!isUtf8(bytes)) {
        return Buffer.concat([Buffer.from(text.end()), bytes]);
      }
      return Buffer.from(text.pass(bytes.toString("utf8")));
    },
    end: () => Buffer.from(text.end()),
  };
}
