// Where a forwarded request names its model (issue 25): the JSON body's
// `model`, else the X-Model header, else a multipart form field `model` (audio
// uploads). And the one change an alias makes to a body: the model's name,
// every other byte left as the client sent it.
import { apiError, type ClientError } from "../../../core/mod.ts";

/** Where the model was found; an alias is rewritten in the same place. */
export type ModelSource = "json" | "header" | "multipart";

export type FoundModel = {
  model: string;
  source: ModelSource;
  stream: boolean;
  /** The JSON body's fields (tenancy reads `user`, `prompt_cache_key`), or {}. */
  fields: Record<string, unknown>;
};

export function modelRequired(): ClientError {
  return apiError("model_required");
}

/**
 * The body's top-level JSON object. `strict` (the inference routes, whose
 * bodies are JSON by their API): a body that is not a JSON object, or whose
 * "stream" is not a boolean, is refused. Otherwise (a forwarded path): a body
 * that is not a JSON object is null, and names nothing.
 */
function jsonObject(
  text: string | null,
  strict: boolean,
): Record<string, unknown> | null | ClientError {
  if (text === null || (!strict && text.trimStart()[0] !== "{")) return null;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return strict ? apiError("invalid_json") : null;
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    return strict
      ? apiError("invalid_body", {
        detail: "request body must be a JSON object",
      })
      : null;
  }
  const obj = v as Record<string, unknown>;
  if (strict && obj.stream !== undefined && typeof obj.stream !== "boolean") {
    return apiError("invalid_stream");
  }
  return obj;
}

/**
 * The model a request names, by one rule for every route: the JSON body's
 * `model`, else X-Model, else a multipart field `model`. `text` is the body
 * when it is UTF-8, else null (then only the header or a multipart field can
 * name it); `strict` as jsonObject reads the body.
 */
export function findModel(
  text: string | null,
  bytes: Uint8Array,
  headers: Record<string, string | string[] | undefined>,
  strict = false,
): FoundModel | ClientError {
  const obj = jsonObject(text, strict);
  if (obj !== null && "status" in obj) return obj as ClientError;
  if (obj !== null && typeof obj.model === "string" && obj.model.trim()) {
    return {
      model: obj.model,
      source: "json",
      stream: obj.stream === true,
      fields: obj,
    };
  }
  const fields = obj ?? {};
  const header = headers["x-model"];
  const named = Array.isArray(header) ? header[0] : header;
  if (named !== undefined && named.trim() !== "") {
    return {
      model: named.trim(),
      source: "header",
      stream: obj?.stream === true,
      fields,
    };
  }
  const boundary = multipartBoundary(headers["content-type"]);
  if (boundary !== null) {
    const model = formField(bytes, boundary, "model");
    if (model !== null && model.value.trim() !== "") {
      return {
        model: model.value.trim(),
        source: "multipart",
        stream: formField(bytes, boundary, "stream")?.value === "true",
        fields,
      };
    }
  }
  return modelRequired();
}

/** The boundary of a multipart/form-data content type, or null. */
export function multipartBoundary(
  contentType: string | string[] | undefined,
): string | null {
  const ct = Array.isArray(contentType) ? contentType[0] : contentType;
  if (ct === undefined || !/^\s*multipart\/form-data\s*;/i.test(ct)) {
    return null;
  }
  const m = /;\s*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(ct);
  return m === null ? null : (m[1] ?? m[2] ?? null);
}

/** A form field's text and where its value lies in the body's bytes. */
type Field = { value: string; start: number; end: number };

/**
 * The first form field `name` of a multipart body (RFC 7578): its value is
 * what lies between the part's blank line and the next delimiter.
 */
export function formField(
  bytes: Uint8Array,
  boundary: string,
  name: string,
): Field | null {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const delimiter = Buffer.from(`--${boundary}`);
  const next = Buffer.from(`\r\n--${boundary}`);
  let at = buf.indexOf(delimiter);
  while (at >= 0) {
    const headStart = at + delimiter.length + 2; // past CRLF
    const headEnd = buf.indexOf("\r\n\r\n", headStart);
    if (headEnd < 0) return null;
    const end = buf.indexOf(next, headEnd + 4);
    if (end < 0) return null;
    const head = buf.subarray(headStart, headEnd).toString("latin1");
    const disposition = /content-disposition:[^\r\n]*;\s*name="([^"]*)"/i
      .exec(head);
    if (disposition?.[1] === name && !/filename=/i.test(head)) {
      const start = headEnd + 4;
      return { value: buf.subarray(start, end).toString("utf8"), start, end };
    }
    at = end + 2;
  }
  return null;
}

/** Skips a JSON string starting at `i` (a quote); returns the index after its closing quote. */
function stringEnd(text: string, i: number): number {
  let j = i + 1;
  while (j < text.length) {
    const c = text.charCodeAt(j);
    if (c === 0x5c) j += 2;
    else if (c === 0x22) return j + 1;
    else j++;
  }
  return j;
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && /\s/.test(text[i]!)) i++;
  return i;
}

/**
 * Where the top-level `model` string value lies in a JSON object's text (the
 * last one, as JSON.parse keeps the last of duplicate keys), or null.
 */
export function modelValueSpan(
  text: string,
): { start: number; end: number } | null {
  let depth = 0;
  let expectKey = false;
  let found: { start: number; end: number } | null = null;
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c === '"') {
      const end = stringEnd(text, i);
      if (depth === 1 && expectKey) {
        const key = JSON.parse(text.slice(i, end));
        const value = skipSpace(text, skipSpace(text, end) + 1);
        if (key === "model" && text[value] === '"') {
          found = { start: value, end: stringEnd(text, value) };
        }
        expectKey = false;
        i = value;
        continue;
      }
      i = end;
      continue;
    }
    if (c === "{" || c === "[") {
      depth++;
      expectKey = c === "{" && depth === 1;
    } else if (c === "}" || c === "]") depth--;
    else if (c === "," && depth === 1) expectKey = true;
    i++;
  }
  return found;
}

/**
 * The body with the model's name replaced by `target` where `source` named
 * it; every other byte unchanged. A header-named model changes no body.
 */
export function renameModel(
  bytes: Buffer,
  text: string | null,
  source: ModelSource,
  target: string,
  boundary: string | null,
): Buffer {
  switch (source) {
    case "header":
      return bytes;
    case "json": {
      const span = modelValueSpan(text!);
      if (span === null) return bytes;
      return Buffer.from(
        text!.slice(0, span.start) + JSON.stringify(target) +
          text!.slice(span.end),
      );
    }
    case "multipart": {
      const field = boundary === null
        ? null
        : formField(bytes, boundary, "model");
      if (field === null) return bytes;
      return Buffer.concat([
        bytes.subarray(0, field.start),
        Buffer.from(target),
        bytes.subarray(field.end),
      ]);
    }
  }
}
