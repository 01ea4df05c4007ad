import assert from "node:assert/strict";
import { utf8Bytes } from "../core/protocol/frame_limit.ts";
import { pieceBytes } from "./piece_bytes.ts";

Deno.test("a piece's UTF-8 size: the shells' count and the core's agree, lone surrogates as U+FFFD", () => {
  const texts = [
    "",
    "ascii",
    "héllo",
    "€ and 日本",
    "\u{1F600} pair",
    "lone \ud83d high",
    "lone \ude00 low",
    "ends high \ud83d",
  ];
  for (const t of texts) {
    assert.equal(pieceBytes(t), utf8Bytes(t), JSON.stringify(t));
    assert.equal(pieceBytes(new TextEncoder().encode(t)), pieceBytes(t));
  }
});
