import assert from "node:assert/strict";
import {
  endsOnEventBoundary,
  lastEventEnd,
  newSseEventPassage,
  SSE_HOLD_BYTES_MAX,
} from "./sse_events.ts";

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);

Deno.test("C60: an event ends at a blank line, whichever line ends the stream uses", () => {
  const cases: [text: string, ends: boolean][] = [
    ["data: a\n\n", true],
    ["data: a\r\n\r\n", true],
    ["data: a\r\r", true],
    ["data: a\n\r\n", true],
    ["\n\n", true],
    ['data: {"choices"', false],
    ["data: a\n", false],
    ["data: a\r\n", false],
    ["data: a\n\nb", false],
    ["", false],
    ["\n", false],
  ];
  for (const [s, ends] of cases) {
    assert.equal(endsOnEventBoundary(s), ends, JSON.stringify(s));
    assert.equal(endsOnEventBoundary(bytes(s)), ends, JSON.stringify(s));
  }
  assert.equal(lastEventEnd('data: a\n\ndata: {"choices"'), 9);
  assert.equal(lastEventEnd("data: a\r\n\r\ndata: b"), 11);
  assert.equal(lastEventEnd("data: a\n"), -1);
});

Deno.test("C60: the passage holds back an unfinished event and passes it on once it is whole", () => {
  const p = newSseEventPassage<string>("");
  assert.equal(p.pass("data: 1\n\n"), "data: 1\n\n");
  assert.equal(p.pass('data: 2\n\ndata: {"cho'), "data: 2\n\n");
  assert.equal(p.held(), 11);
  assert.equal(p.pass('ices":[]}\n'), "");
  assert.equal(p.pass("\ndata: 3"), 'data: {"choices":[]}\n\n');
  assert.equal(p.end(), "data: 3");
  assert.equal(p.end(), "");
});

Deno.test("C60: the byte passage splits a CRLF blank line across reads correctly", () => {
  const p = newSseEventPassage<Uint8Array>(new Uint8Array(0));
  assert.equal(text(p.pass(bytes("data: 1\r\n\r"))), "data: 1\r\n\r");
  assert.equal(text(p.pass(bytes("\ndata: 2\r"))), "");
  assert.equal(text(p.pass(bytes("\n\r\n"))), "\ndata: 2\r\n\r\n");
  assert.equal(p.held(), 0);
});

Deno.test("C60: held bytes are a copy, not a view of the read's buffer", () => {
  const p = newSseEventPassage<Uint8Array>(new Uint8Array(0));
  const read = bytes("data: a\n\ndata: b");
  p.pass(read);
  read.fill(0);
  assert.equal(text(p.end()), "data: b");
});

Deno.test("C60: an event larger than the hold limit is passed on rather than held without bound", () => {
  const p = newSseEventPassage<string>("");
  const big = "data: " + "x".repeat(SSE_HOLD_BYTES_MAX);
  assert.equal(p.pass(big), big);
  assert.equal(p.held(), 0);
});
