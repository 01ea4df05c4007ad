// Pure frame decoders: text in, a typed message or a typed error out. They never
// throw into the caller (issue 3), so the simulator can feed them garbage (C33).
import {
  type ServerMessage,
  serverMessageSchema,
  type WorkerMessage,
  workerMessageSchema,
} from "./messages.ts";

export type DecodeError = {
  kind:
    | "frameTooLarge"
    | "notJson"
    | "notAnObject"
    | "unknownType"
    | "invalidFields";
  message: string;
};
export type Decoded<T> = { ok: true; message: T } | {
  ok: false;
  error: DecodeError;
};

const WORKER_TYPES = new Set([
  "register",
  "models_update",
  "response_chunk",
  "response_complete",
  "pong",
  "error",
  "capabilities",
  "lifecycle_progress",
]);
const SERVER_TYPES = new Set([
  "register_ack",
  "request",
  "cancel",
  "ping",
  "graceful_shutdown",
  "models_refresh",
  "lifecycle_request",
]);

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
    return { ok: false, error: { kind: "frameTooLarge", message } };
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
  if (typeof type !== "string" || !WORKER_TYPES.has(type)) {
    return fail("unknownType", `unknown message type ${JSON.stringify(type)}`);
  }
  const parsed = workerMessageSchema.safeParse(obj);
  if (!parsed.success) {
    return fail(
      "invalidFields",
      `invalid ${type} frame: ${summarize(parsed.error.issues)}`,
    );
  }
  return { ok: true, message: parsed.data };
}

/** Decodes a frame sent by a server (used by our worker). */
export function decodeServerFrame(
  text: string,
  maxChars: number,
): Decoded<ServerMessage> {
  const parsedObj = parseObject(text, maxChars);
  if (!parsedObj.ok) return parsedObj;
  const obj = parsedObj.obj;
  const type = obj.type;
  if (typeof type !== "string" || !SERVER_TYPES.has(type)) {
    return fail("unknownType", `unknown message type ${JSON.stringify(type)}`);
  }
  const parsed = serverMessageSchema.safeParse(obj);
  if (!parsed.success) {
    return fail(
      "invalidFields",
      `invalid ${type} frame: ${summarize(parsed.error.issues)}`,
    );
  }
  return { ok: true, message: parsed.data };
}

function summarize(
  issues: readonly { path: readonly PropertyKey[]; message: string }[],
): string {
  return issues.slice(0, 3).map((i) =>
    `${i.path.map(String).join(".") || "(root)"}: ${i.message}`
  )
    .join("; ");
}
