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

const sizeLine = fc.oneof(
  { weight: 4, arbitrary: fc.constant("plain") },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "0000000000000000000",
      "fffffffffffffff",
      "1;ext=1",
      "1 ",
      " 1",
      "x",
      "",
      "1\r",
      "1\n",
    ),
  },
);

const chunks = fc.array(
  fc.record({
    data: fc.string({ unit: "binary-ascii", minLength: 1, maxLength: 20 }),
    line: sizeLine,
    upper: fc.boolean(),
    zeros: fc.nat({ max: 3 }),
    end: fc.constantFrom("\r\n", "\r\n", "\r\n", "\n", "\rx", ""),
  }),
  { maxLength: 5 },
);

Deno.test("issue 31: chunk sizes read from whole lines give the same events and errors as the same lines read in pieces", () => {
  fc.assert(
    fc.property(chunks, fc.boolean(), (cs, last) => {
      let text = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
      /** Where each chunk-size line starts, as long as the framing before is sound. */
      const starts: number[] = [];
      let sound = true;
      for (const c of cs) {
        if (sound) starts.push(text.length);
        sound &&= c.line === "plain" && c.end === "\r\n";
        let hex = c.data.length.toString(16);
        if (c.upper) hex = hex.toUpperCase();
        const size = c.line === "plain" ? "0".repeat(c.zeros) + hex : c.line;
        text += `${size}\r\n${c.data}${c.end}`;
      }
      if (last) {
        if (sound) starts.push(text.length);
        text += "0\r\n\r\n";
      }
      const bytes = Uint8Array.from(text, (c) => c.charCodeAt(0) & 0xff);
      // One byte of each size line alone: the rest of it comes whole, to the
      // line path (a lone first byte is never judged early, not even a CR).
      const cuts = starts.flatMap((s) => [s, s + 1]);
      assert.deepEqual(read(bytes, []), read(bytes, cuts));
    }),
    { numRuns: 2000 },
  );
});

Deno.test("issue 31: a chunked body's chunks in one read go out as one slice, the framing between them left out", () => {
  const text = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" +
    "3\r\nabc\r\n4;x=y\r\ndefg\r\n1\r\nh\r\n";
  const slices: string[] = [];
  const p = newResponseParser();
  const events = {
    head() {},
    body: (b: Buffer) => slices.push(b.toString("latin1")),
    complete() {},
  };
  feed(p, Buffer.from(text, "latin1"), events);
  // The next read ends the body: its chunk, then the last chunk.
  feed(p, Buffer.from("2\r\nij\r\n0\r\n\r\n", "latin1"), events);
  assert.deepEqual(slices, ["abcdefgh", "ij"]);
});
