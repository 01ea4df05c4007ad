// The response parser reads a head that arrives whole in one read at once
// (wholeHead) and any other head line by line: both must give the same
// events and the same error for the same bytes, whatever the bytes. The
// bytes are read whole, then with the first byte alone (the rest of the head
// then goes line by line, each line whole, as before wholeHead).
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  feed,
  isParseError,
  newResponseParser,
  type ResponseHead,
} from "./response_parser.ts";

type Seen = {
  heads: ResponseHead[];
  body: number[];
  complete: number | null;
  error: string | null;
};

/** Feeds `bytes` in reads split at `cuts` and records what the parser said. */
function read(bytes: Uint8Array, cuts: number[]): Seen {
  const seen: Seen = { heads: [], body: [], complete: null, error: null };
  const p = newResponseParser();
  const events = {
    head: (h: ResponseHead) => seen.heads.push(h),
    body: (b: Buffer) => seen.body.push(...b),
    complete: (rest: number) => seen.complete = rest,
  };
  try {
    let at = 0;
    for (const cut of [...cuts, bytes.length]) {
      if (seen.complete !== null) break;
      feed(p, Buffer.from(bytes.subarray(at, cut)), events);
      at = cut;
    }
  } catch (e) {
    if (!isParseError(e)) throw e;
    seen.error = e.message;
  }
  // The bytes left after a complete message depend on the read size: only
  // whether something followed is compared.
  if (seen.complete !== null) seen.complete = seen.complete > 0 ? 1 : 0;
  return seen;
}

const line = fc.oneof(
  { weight: 6, arbitrary: fc.stringMatching(/^[A-Za-z-]{1,10}: [ -~]{0,12}$/) },
  {
    weight: 1,
    arbitrary: fc.string({ unit: "binary-ascii", maxLength: 12 }),
  },
  { weight: 1, arbitrary: fc.constantFrom("", " folded", "a\rb", "x\n") },
);

const head = fc.record({
  lead: fc.constantFrom("", "", "", "\r\n", "\n"),
  status: fc.constantFrom(
    "HTTP/1.1 200 OK",
    "HTTP/1.0 200 OK",
    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK",
    "HTTP/1.1 204 No Content",
    "HTTP/1.1 2000 Bad",
    "HTTP/3.0 200 OK",
  ),
  lines: fc.array(line, { maxLength: 6 }),
  framing: fc.constantFrom(
    "content-length: 5\r\n",
    "transfer-encoding: chunked\r\n",
    "",
  ),
  eol: fc.constantFrom("\r\n", "\r\n", "\r\n", "\n", "\r"),
  body: fc.constantFrom("hello", "5\r\nhello\r\n0\r\n\r\n", "hello, and more"),
});

Deno.test("issue 31: a head read whole gives the same events and errors as the same head read line by line", () => {
  fc.assert(
    fc.property(head, (h) => {
      const text = `${h.lead}${h.status}\r\n${
        h.lines.map((l) => `${l}${h.eol}`).join("")
      }${h.framing}\r\n${h.body}`;
      const bytes = Uint8Array.from(text, (c) => c.charCodeAt(0) & 0xff);
      assert.deepEqual(read(bytes, []), read(bytes, [1]));
    }),
    { numRuns: 2000 },
  );
});
