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
  for (
    const s of [
      "data: a\n\n",
      "data: a\r\n\r\n",
      "data: a\r\r",
      "data: a\n\r\n",
      "\n\n",
    ]
  ) {
    assert.equal(endsOnEventBoundary(s), true, JSON.stringify(s));
    assert.equal(endsOnEventBoundary(bytes(s)), true, JSON.stringify(s));
  }
  for (
    const s of [
      'data: {"choices"',
      "data: a\n",
      "data: a\r\n",
      "data: a\n\nb",
      "",
      "\n",
    ]
  ) {
    assert.equal(endsOnEventBoundary(s), false, JSON.stringify(s));
    assert.equal(endsOnEventBoundary(bytes(s)), false, JSON.stringify(s));
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
