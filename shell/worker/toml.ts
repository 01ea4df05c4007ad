// A TOML reader for the flat files the original's setup wizard writes (the
// worker's --config): `key = value` lines with strings, integers, booleans and
// arrays of them, comments and blank lines. Anything else (tables, dates,
// inline tables) is refused with its line number rather than misread.

export type TomlValue = string | number | boolean | TomlValue[];

export class TomlError extends Error {}

type Cursor = { text: string; at: number };

/** The file's keys and values; throws TomlError naming the line that is wrong. */
export function parseToml(text: string): Record<string, TomlValue> {
  const c: Cursor = { text: text.replace(/^\uFEFF/, ""), at: 0 };
  const out: Record<string, TomlValue> = {};
  for (;;) {
    skipBlankAndComments(c);
    if (c.at >= c.text.length) return out;
    if (c.text[c.at] === "[") {
      fail(c, "tables ([section]) are not supported: write key = value lines");
    }
    const key = readKey(c);
    skipSpaces(c);
    if (c.text[c.at] !== "=") fail(c, `expected = after the key "${key}"`);
    c.at++;
    skipSpaces(c);
    if (Object.hasOwn(out, key)) fail(c, `the key "${key}" is set twice`);
    out[key] = readValue(c);
    skipSpaces(c);
    skipComment(c);
    if (c.at < c.text.length && !atNewline(c)) {
      fail(c, `unexpected text after the value of "${key}"`);
    }
  }
}

function lineOf(c: Cursor): number {
  return c.text.slice(0, c.at).split("\n").length;
}

function fail(c: Cursor, why: string): never {
  throw new TomlError(`line ${lineOf(c)}: ${why}`);
}

function atNewline(c: Cursor): boolean {
  return c.text[c.at] === "\n" || c.text.startsWith("\r\n", c.at);
}

function skipSpaces(c: Cursor): void {
  while (c.text[c.at] === " " || c.text[c.at] === "\t") c.at++;
}

function skipComment(c: Cursor): void {
  if (c.text[c.at] !== "#") return;
  while (c.at < c.text.length && !atNewline(c)) c.at++;
}

/** Spaces, newlines and comments: between lines, and inside an array. */
function skipBlankAndComments(c: Cursor): void {
  for (;;) {
    const before = c.at;
    skipSpaces(c);
    skipComment(c);
    if (c.text[c.at] === "\n") c.at++;
    else if (c.text.startsWith("\r\n", c.at)) c.at += 2;
    if (c.at === before) return;
  }
}

function readKey(c: Cursor): string {
  const q = c.text[c.at];
  if (q === '"' || q === "'") return readString(c);
  const m = /^[A-Za-z0-9_-]+/.exec(c.text.slice(c.at));
  if (m === null) fail(c, "expected a key (letters, digits, _ or -)");
  c.at += m[0].length;
  if (c.text[c.at] === ".") fail(c, "dotted keys are not supported");
  return m[0];
}

function readValue(c: Cursor): TomlValue {
  const ch = c.text[c.at];
  if (ch === '"' || ch === "'") return readString(c);
  if (ch === "[") return readArray(c);
  const rest = c.text.slice(c.at);
  const bool = /^(true|false)(?![A-Za-z0-9_-])/.exec(rest);
  if (bool !== null) {
    c.at += bool[0].length;
    return bool[1] === "true";
  }
  const num = /^[+-]?\d(?:_?\d)*(?:\.\d(?:_?\d)*)?(?:[eE][+-]?\d+)?(?![\w:.-])/
    .exec(rest);
  if (num !== null) {
    c.at += num[0].length;
    return Number(num[0].replaceAll("_", ""));
  }
  fail(
    c,
    'expected a value: a "string", a number, true/false or an [array]',
  );
}

function readArray(c: Cursor): TomlValue[] {
  c.at++; // [
  const items: TomlValue[] = [];
  for (;;) {
    skipBlankAndComments(c);
    if (c.text[c.at] === "]") {
      c.at++;
      return items;
    }
    if (c.at >= c.text.length) fail(c, "the array is not closed with ]");
    items.push(readValue(c));
    skipBlankAndComments(c);
    if (c.text[c.at] === ",") c.at++;
    else if (c.text[c.at] !== "]") fail(c, "expected , or ] in the array");
  }
}

const ESCAPES: Record<string, string> = {
  b: "\b",
  t: "\t",
  n: "\n",
  f: "\f",
  r: "\r",
  '"': '"',
  "\\": "\\",
};

/** A one-line basic ("…", with escapes) or literal ('…', as written) string. */
function readString(c: Cursor): string {
  const quote = c.text[c.at]!;
  if (c.text.startsWith(quote.repeat(3), c.at)) {
    fail(c, "multi-line strings are not supported");
  }
  c.at++;
  let out = "";
  for (;;) {
    const ch = c.text[c.at];
    if (ch === undefined || ch === "\n") fail(c, "the string is not closed");
    c.at++;
    if (ch === quote) return out;
    if (ch !== "\\" || quote === "'") {
      out += ch;
      continue;
    }
    const e = c.text[c.at++] ?? "";
    if (e in ESCAPES) out += ESCAPES[e];
    else if (e === "u" || e === "U") {
      const len = e === "u" ? 4 : 8;
      const hex = c.text.slice(c.at, c.at + len);
      if (!new RegExp(`^[0-9A-Fa-f]{${len}}$`).test(hex)) {
        fail(c, `\\${e} needs ${len} hex digits`);
      }
      out += String.fromCodePoint(parseInt(hex, 16));
      c.at += len;
    } else fail(c, `unknown escape \\${e} in a string`);
  }
}
