import assert from "node:assert/strict";
import { incompleteTail, newUtf8Passage } from "./utf8_passage.ts";

const bytes = (...b: number[]) => new Uint8Array(b);

Deno.test("C45 incompleteTail holds back only a valid prefix of a character", () => {
  assert.equal(incompleteTail(bytes()), 0);
  assert.equal(incompleteTail(bytes(0x41)), 0);
  assert.equal(incompleteTail(bytes(0x41, 0xc3)), 1); // é cut after its lead
  assert.equal(incompleteTail(bytes(0xc3, 0xa9)), 0); // é whole
  assert.equal(incompleteTail(bytes(0xe2, 0x82)), 2); // € cut
  assert.equal(incompleteTail(bytes(0xf0, 0x9f, 0x98)), 3); // 😀 cut
  assert.equal(incompleteTail(bytes(0xf0, 0x9f, 0x98, 0x80)), 0);
  assert.equal(incompleteTail(bytes(0xff)), 0); // no character starts so
  assert.equal(incompleteTail(bytes(0xed, 0xa0)), 0); // a surrogate: never valid
  assert.equal(incompleteTail(bytes(0xe0, 0x80)), 0); // overlong
  assert.equal(incompleteTail(bytes(0xf4, 0x90)), 0); // above U+10FFFF
  assert.equal(incompleteTail(bytes(0x80, 0x80, 0x80)), 0); // stray continuations
});

/** A small deterministic PRNG (tests only). */
function prng(seed: number): (n: number) => number {
  let s = seed;
  return (n) => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return s % n;
  };
}

Deno.test("C45 bytes passed through the passage, however split, equal what the text path delivers (valid and invalid input)", () => {
  // The text path: a streaming UTF-8 decoder, then UTF-8 again on the server;
  // boundary-independent, so one decode of the whole is its reference.
  const alphabet = [
    0x41,
    0x0a,
    0x20,
    0xc3,
    0xa9,
    0xe2,
    0x82,
    0xac,
    0xf0,
    0x9f,
    0x98,
    0x80,
    0xff,
    0x80,
    0xed,
    0xa0,
    0xc0,
    0xf4,
    0x90,
    0xe0,
  ];
  const rnd = prng(18);
  for (let t = 0; t < 5000; t++) {
    const input = Buffer.from(
      Array.from(
        { length: 1 + rnd(24) },
        () => alphabet[rnd(alphabet.length)]!,
      ),
    );
    const p = newUtf8Passage();
    const out: Buffer[] = [];
    for (let i = 0; i < input.length;) {
      const j = i + 1 + rnd(5);
      out.push(p.pass(input.subarray(i, j)));
      i = j;
    }
    out.push(p.end());
    const expected = Buffer.from(new TextDecoder().decode(input), "utf8");
    assert.deepEqual(Buffer.concat(out), expected, [...input].join(","));
    // No piece ends inside a character: each one is valid UTF-8 on its own.
    const fatal = new TextDecoder("utf-8", { fatal: true });
    for (const piece of out) assert.doesNotThrow(() => fatal.decode(piece));
  }
});

Deno.test("C45 valid input leaves the passage untouched: the very read, no copy", () => {
  const p = newUtf8Passage();
  const read = Buffer.from("data: héllo\n\n");
  assert.equal(p.pass(read), read);
  assert.equal(p.end().length, 0);
});
