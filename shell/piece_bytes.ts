// The UTF-8 size of a piece of an answer (issue 34: one rule in one place): a
// text piece counts its UTF-8 bytes (a lone surrogate as the 3 bytes of the
// U+FFFD it goes out as), a binary piece its length. The shells count with
// node's native `Buffer.byteLength`; the pure core cannot, and counts the same
// number with core/protocol/frame_limit.ts `utf8Bytes` (piece_bytes_test.ts
// holds the two to the same answer). utf8Bytes is a JavaScript loop, about
// 300 times slower on a 17 MB string, so the shells never call it.
import { Buffer } from "node:buffer";
import type { ChunkData } from "../core/mod.ts";

export function pieceBytes(piece: ChunkData): number {
  return typeof piece === "string"
    ? Buffer.byteLength(piece, "utf8")
    : piece.length;
}
