// Every error code named in the relay's source is the catalogue's
// (core/protocol/errors.ts), and no error is built beside it (issue 34).
import assert from "node:assert/strict";
import { isErrorCode } from "../core/protocol/errors.ts";

/** Source files of the relay (not tests: they may name codes a foreign peer sends). */
function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of Deno.readDirSync(dir)) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory) out.push(...sources(path));
    else if (
      e.name.endsWith(".ts") && !e.name.endsWith("_test.ts") &&
      !e.name.startsWith("_")
    ) out.push(path);
  }
  return out;
}

const ROOT = new URL("../", import.meta.url).pathname;
const FILES = ["core", "shell", "sim"].flatMap((d) => sources(`${ROOT}${d}`));
const CATALOGUE = `${ROOT}core/protocol/errors.ts`;

/**
 * The places a code is named: a `code` property or comparison, and the
 * catalogue's builders. A literal there that is not a catalogue code is a code
 * defined outside it.
 */
const CODE_SITES = [
  /(?<!typeof\s)\bcode\s*(?::|[!=]==?)\s*((?:"[a-z0-9_]+"\s*(?:[?:|]\s*)?)+)/g,
  /\bcode\s*:\s*[^,\n]*\?\s*"([a-z0-9_]+)"\s*:\s*"([a-z0-9_]+)"/g,
  /\b(?:apiError|answerTooLarge)\(\s*(?:[^,()]*\?\s*)?"([a-z0-9_]+)"(?:\s*:\s*"([a-z0-9_]+)")?/g,
];

/** Wire words that share the `code` name and are not client errors. */
const NOT_ERRORS = new Set([
  // cancel reasons the server sends a worker (protocol/messages.ts)
  "client_disconnected",
  "timeout",
  "superseded",
  // the protocol decoder's own error kinds, closed with these WebSocket reasons
  "invalid_frame",
  // a simulated foreign worker's own code, relayed as it sent it (sim/virtual_worker.ts)
  "foreign",
]);

Deno.test("every error code named in core/ and shell/ is the catalogue's", () => {
  const strays: string[] = [];
  for (const file of FILES) {
    if (file === CATALOGUE) continue;
    const text = Deno.readTextFileSync(file);
    for (const pattern of CODE_SITES) {
      for (const m of text.matchAll(pattern)) {
        const names = m.slice(1).join(" ").match(/[a-z0-9_]+/g) ?? [];
        for (const name of names) {
          if (!isErrorCode(name) && !NOT_ERRORS.has(name)) {
            strays.push(`${file.slice(ROOT.length)}: ${name}`);
          }
        }
      }
    }
  }
  assert.deepEqual(strays, []);
});

/**
 * An error built by hand: a status with a code beside it (`404, "x"` or
 * `status: 404, code:`), or a `type` written out. Only the catalogue and the
 * one body writer do that.
 */
const HAND_BUILT = [
  /\b[45]\d\d,\s*"[a-z]+_[a-z_]+"/g,
  /status:\s*[45]\d\d,\s*\n?\s*code:/g,
  /type:\s*"(?:invalid_request_error|server_error|api_error|not_found_error|permission_error|authentication_error)"/g,
];

Deno.test("no error is built by hand outside the catalogue", () => {
  const found: string[] = [];
  for (const file of FILES) {
    const rel = file.slice(ROOT.length);
    if (
      file === CATALOGUE || rel === "core/protocol/error_body.ts"
    ) continue;
    const text = Deno.readTextFileSync(file);
    for (const pattern of HAND_BUILT) {
      for (const m of text.matchAll(pattern)) found.push(`${rel}: ${m[0]}`);
    }
  }
  assert.deepEqual(found, []);
});
