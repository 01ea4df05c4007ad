// Pure frame decoders: text in, a typed message or a typed error out. They never
// throw into the caller (issue 3), so the simulator can feed them garbage (C33).
import {
  type RequestMessage,
  type ResponseCompleteMessage,
  SERVER_MESSAGE_TYPES,
  type ServerMessage,
  serverMessageSchema,
  type TokenCounts,
  WORKER_MESSAGE_TYPES,
  type WorkerMessage,
  workerMessageSchema,
} from "./messages.ts";

export type DecodeError = {
  kind:
    | "frameTooLarge"
    | "notJson"
    | "notAnObject"
    | "unknownType"
    | "invalidFields"
    /** A chunk-bytes-v1 binary frame whose header cannot be read (binary.ts). */
    | "badBinaryFrame";
  message: string;
  /**
   * frameTooLarge only: the per-request frame it started as, when its first
   * fields say so (issue 14: the oversized answer fails its own request
   * instead of the whole connection).
   */
  oversized?: OversizedFrame;
};

/** The start of an oversized `response_chunk` / `response_complete`. */
export type OversizedFrame = {
  type: "response_chunk" | "response_complete";
  requestId: string;
};

// `type` and `request_id` as the frame's first two fields, in either order: how
// serde (the original worker) and our encoder write them. Nothing after them is
// looked at, so a field of the same name inside the body cannot be mistaken.
const FRAME_START =
  /^\s*\{\s*"(type|request_id)"\s*:\s*("(?:[^"\\]|\\.){0,1024}")\s*,\s*"(type|request_id)"\s*:\s*("(?:[^"\\]|\\.){0,1024}")/;

/** Reads the per-request frame an oversized text starts as, or undefined. */
export function oversizedFrameStart(text: string): OversizedFrame | undefined {
  const m = FRAME_START.exec(text.slice(0, 4200));
  if (m === null || m[1] === m[3]) return undefined;
  let type: unknown, requestId: unknown;
  try {
    const first = JSON.parse(m[2]!), second = JSON.parse(m[4]!);
    [type, requestId] = m[1] === "type" ? [first, second] : [second, first];
  } catch {
    return undefined;
  }
  if (
    (type !== "response_chunk" && type !== "response_complete") ||
    typeof requestId !== "string"
  ) return undefined;
  return { type, requestId };
}
export type Decoded<T> = { ok: true; message: T } | {
  ok: false;
  error: DecodeError;
};

const WORKER_TYPES = new Set<string>(WORKER_MESSAGE_TYPES);
const SERVER_TYPES = new Set<string>(SERVER_MESSAGE_TYPES);

function fail<T>(kind: DecodeError["kind"], message: string): Decoded<T> {
  return { ok: false, error: { kind, message } };
}

type Parsed = { ok: true; obj: Record<string, unknown> } | {
  ok: false;
  error: DecodeError;
};

function parseObject(text: string, maxChars: number): Parsed {
  if (text.length > maxChars) {
    const message =
      `frame of ${text.length} characters exceeds the ${maxChars} limit`;
    const oversized = oversizedFrameStart(text);
    return {
      ok: false,
      error: oversized === undefined
        ? { kind: "frameTooLarge", message }
        : { kind: "frameTooLarge", message, oversized },
    };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return {
      ok: false,
      error: { kind: "notJson", message: "frame is not valid JSON" },
    };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return {
      ok: false,
      error: { kind: "notAnObject", message: "frame is not a JSON object" },
    };
  }
  return { ok: true, obj: value as Record<string, unknown> };
}

/**
 * Decodes a frame sent by a worker. The streaming hot path (`response_chunk`) is
 * checked by hand after the single JSON.parse: one parse, no zod pass per chunk
 * (issue 10). Everything else goes through the zod schemas.
 */
export function decodeWorkerFrame(
  text: string,
  maxChars: number,
): Decoded<WorkerMessage> {
  const parsedObj = parseObject(text, maxChars);
  if (!parsedObj.ok) return parsedObj;
  const obj = parsedObj.obj;
  const type = obj.type;
  if (type === "response_chunk") {
    if (typeof obj.request_id === "string" && typeof obj.chunk === "string") {
      return {
        ok: true,
        message: {
          type: "response_chunk",
          request_id: obj.request_id,
          chunk: obj.chunk,
        },
      };
    }
    return fail(
      "invalidFields",
      "response_chunk needs string request_id and chunk",
    );
  }
  return decodeChecked(
    obj,
    type,
    WORKER_TYPES,
    workerMessageSchema,
    responseCompleteIfOne,
  );
}

/**
 * The common tail of both decoders: the per-request frame's hand-written guard
 * first, then zod, which decides anything the guard did not accept and words
 * the error.
 */
function decodeChecked<T>(
  obj: Record<string, unknown>,
  type: unknown,
  known: ReadonlySet<string>,
  schema: { safeParse(v: unknown): ZodResult<T> },
  fast: (obj: Record<string, unknown>) => T | null,
): Decoded<T> {
  const quick = fast(obj);
  if (quick !== null) return { ok: true, message: quick };
  if (typeof type !== "string" || !known.has(type)) {
    return fail("unknownType", `unknown message type ${JSON.stringify(type)}`);
  }
  const parsed = schema.safeParse(obj);
  if (!parsed.success) {
    return fail(
      "invalidFields",
      `invalid ${type} frame: ${summarize(parsed.error.issues)}`,
    );
  }
  return { ok: true, message: parsed.data };
}

type ZodResult<T> =
  | { success: true; data: T }
  | {
    success: false;
    error: {
      issues: readonly { path: readonly PropertyKey[]; message: string }[];
    };
  };

/** Decodes a frame sent by a server (used by our worker). */
export function decodeServerFrame(
  text: string,
  maxChars: number,
): Decoded<ServerMessage> {
  const parsedObj = parseObject(text, maxChars);
  if (!parsedObj.ok) return parsedObj;
  const obj = parsedObj.obj;
  const type = obj.type;
  return decodeChecked(
    obj,
    type,
    SERVER_TYPES,
    serverMessageSchema,
    requestIfOne,
  );
}

// ---- hand-written guards for the per-request frames (issue 10) ---------------
// Each returns exactly what the zod schema in messages.ts would (same fields in
// the same order, unknown fields dropped, absent optional fields left absent),
// or null when the frame is anything else; the caller then asks zod, so a
// rejection and its message are zod's. decode_test.ts checks the equivalence.

/** A `z.record(z.string(), z.string())` value, copied as zod copies it; undefined when not one. */
function stringRecord(value: unknown): Record<string, string> | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return undefined;
  }
  const out: Record<string, string> = {};
  // for-in, not Object.keys (an array per frame, issue 31): a parsed frame's
  // objects inherit no enumerable key, so both give the same keys in order.
  for (const key in value) {
    if (key === "__proto__") continue; // zod skips it, value unchecked
    const v = (value as Record<string, unknown>)[key];
    if (typeof v !== "string") return undefined;
    out[key] = v;
  }
  return out;
}

/**
 * Copies the `.nullish()` field `key` of `o` onto `out` as zod does: absent
 * stays absent, null stays null, anything else is what `read` makes of it.
 * False when `read` rejects it (undefined).
 */
function copyNullish<T, K extends keyof T & string>(
  o: Record<string, unknown>,
  out: T,
  key: K,
  read: (value: unknown) => NonNullable<T[K]> | undefined,
): boolean {
  const v = o[key];
  if (v === undefined) return true;
  if (v === null) {
    out[key] = null as T[K];
    return true;
  }
  const value = read(v);
  if (value === undefined) return false;
  out[key] = value;
  return true;
}

/** A `z.string()` value; undefined when not one. */
function aString(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

/** `count.nullish()`: an integer in [0, 2^32 - 1], null, or absent. */
function isCountOrNullish(v: unknown): boolean {
  return v == null ||
    (typeof v === "number" && Number.isInteger(v) && v >= 0 &&
      v <= 0xffff_ffff);
}

function tokenCountsFast(value: unknown): TokenCounts | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return undefined;
  }
  const o = value as Record<string, unknown>;
  const p = o.prompt_tokens, c = o.completion_tokens, t = o.total_tokens;
  if (!isCountOrNullish(p) || !isCountOrNullish(c) || !isCountOrNullish(t)) {
    return undefined;
  }
  const out: TokenCounts = {};
  if (p !== undefined) out.prompt_tokens = p as number | null;
  if (c !== undefined) out.completion_tokens = c as number | null;
  if (t !== undefined) out.total_tokens = t as number | null;
  return out;
}

function responseCompleteFast(
  o: Record<string, unknown>,
): ResponseCompleteMessage | null {
  const status = o.status_code;
  if (
    typeof o.request_id !== "string" || typeof status !== "number" ||
    !Number.isInteger(status) || status < 100 || status > 999
  ) return null;
  const out: ResponseCompleteMessage = {
    type: "response_complete",
    request_id: o.request_id,
    status_code: status,
  };
  const ok = copyNullish(o, out, "headers", stringRecord) &&
    copyNullish(o, out, "body", aString) &&
    copyNullish(o, out, "token_counts", tokenCountsFast) &&
    copyNullish(o, out, "body_base64", aString);
  return ok ? out : null;
}

// The guards by frame type, as module functions: no closure per frame (issue
// 31, third round).
function responseCompleteIfOne(
  o: Record<string, unknown>,
): ResponseCompleteMessage | null {
  return o.type === "response_complete" ? responseCompleteFast(o) : null;
}

function requestIfOne(o: Record<string, unknown>): RequestMessage | null {
  return o.type === "request" ? requestFast(o) : null;
}

function requestFast(o: Record<string, unknown>): RequestMessage | null {
  if (
    typeof o.request_id !== "string" || typeof o.model !== "string" ||
    typeof o.endpoint_path !== "string" ||
    typeof o.is_streaming !== "boolean" || typeof o.body !== "string"
  ) return null;
  const out: RequestMessage = {
    type: "request",
    request_id: o.request_id,
    model: o.model,
    endpoint_path: o.endpoint_path,
    is_streaming: o.is_streaming,
    body: o.body,
  };
  // Issue 25's fields: the original's `method`, body-bytes-v1's `body_base64`.
  const ok = copyNullish(o, out, "headers", stringRecord) &&
    copyNullish(o, out, "method", aString) &&
    copyNullish(o, out, "body_base64", aString);
  return ok ? out : null;
}

function summarize(
  issues: readonly { path: readonly PropertyKey[]; message: string }[],
): string {
  return issues.slice(0, 3).map((i) =>
    `${i.path.map(String).join(".") || "(root)"}: ${i.message}`
  )
    .join("; ");
}
