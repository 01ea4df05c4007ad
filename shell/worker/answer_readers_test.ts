import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { StringDecoder } from "node:string_decoder";
import fc from "fast-check";
import { type AnswerBody, onWholeText } from "./answer_readers.ts";

/** Bytes that make every kind of UTF-8 sequence: whole, cut, invalid. */
const utf8ish = fc.uint8Array({ maxLength: 12 }).chain((free) =>
  fc.array(
    fc.constantFrom(
      0x41,
      0x0a,
      0x7f,
      0x80,
      0x82,
      0x9f,
      0xa0,
      0xa9,
      0xbf,
      0xc0,
      0xc3,
      0xdf,
      0xe0,
      0xe2,
      0xed,
      0xef,
      0xf0,
      0xf4,
      0xf5,
      0xff,
    ),
    { maxLength: 12 },
  ).map((picked) => [...picked, ...free])
);

/** An answer body that plays `reads` then its end to whoever listens. */
function played(reads: Uint8Array[]): { body: AnswerBody; play(): void } {
  let onData = (_: Buffer) => {};
  let onEnd = () => {};
  return {
    body: {
      onData: (f) => onData = f,
      onEnd: (f) => onEnd = f,
      pause: () => {},
      resume: () => {},
      isPaused: () => false,
    },
    play() {
      for (const r of reads) onData(Buffer.from(r));
      onEnd();
    },
  };
}

Deno.test("issue 31: a buffered answer's text, held as bytes while it is one read, equals a streaming decoder's of the same reads (valid and invalid UTF-8)", () => {
  fc.assert(
    fc.property(
      fc.array(utf8ish.map((b) => new Uint8Array(b)), {
        minLength: 0,
        maxLength: 4,
      }),
      (reads) => {
        const decoder = new StringDecoder("utf8");
        let expected = "";
        for (const r of reads) expected += decoder.write(Buffer.from(r));
        expected += decoder.end();
        let got = "";
        let ended = 0;
        const { body, play } = played(reads);
        onWholeText(body, (s) => got += s, () => ended++);
        play();
        assert.equal(got, expected);
        assert.equal(ended, 1);
      },
    ),
    { numRuns: 20_000 },
  );
});

Deno.test("issue 31: a buffered answer's pieces of text arrive in order and end once", () => {
  const seen: string[] = [];
  const { body, play } = played([
    new TextEncoder().encode("ab\u00e9"),
    new Uint8Array([0xe2, 0x82]),
    new Uint8Array([0xac, 0x21]),
  ]);
  onWholeText(body, (s) => seen.push(s), () => seen.push("(end)"));
  play();
  assert.deepEqual(seen, ["ab\u00e9", "", "\u20ac!", "(end)"]);
});
