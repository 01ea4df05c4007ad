import assert from "node:assert/strict";
import fc from "fast-check";
import { countDeltas } from "../../core/state/usage.ts";

// The byte search (Horspool's skips, core/state/usage.ts) against the text's
// native indexOf. Pieces that make the skips matter: the fields themselves, their
// quotes, colons and letters, spaces before a value, and characters of two and
// three UTF-8 bytes.
const piece = fc.constantFrom(
  '"content":',
  '"text":',
  '"',
  '""',
  ":",
  " ",
  "c",
  "t",
  "x",
  "content",
  "é",
  "€",
  "\n",
);
const chunk = fc.array(piece, { maxLength: 40 }).map((p) => p.join(""));

Deno.test("issue 26: content deltas counted in bytes are those counted in the text (native indexOf), on both routes", () => {
  const enc = new TextEncoder();
  fc.assert(
    fc.property(chunk, (text) => {
      for (const route of ["/v1/chat/completions", "/v1/completions"]) {
        assert.equal(
          countDeltas(enc.encode(text), route),
          countDeltas(text, route),
        );
      }
    }),
    { numRuns: 5000, seed: 31 },
  );
});
