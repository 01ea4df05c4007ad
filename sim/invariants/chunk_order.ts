// chunkOrder (C15): chunks reach the client in the order the worker sent them.
import type { MReq } from "../model/model.ts";
import type { Piece } from "../model/pieces.ts";
import type { Check } from "./catalog.ts";

/** Piece `i` of a whole response body: pieces count up, a non-streaming body ends with "B". */
export function bodyPieceInOrder(
  check: Check,
  r: MReq,
  p: Piece,
  i: number,
  count: number,
  body: string,
): void {
  check(
    p.tag === (i === count - 1 && !r.streaming ? "B" : String(i)),
    "chunkOrder",
    () => `response body of ${r.id} out of order: ${JSON.stringify(body)}`,
  );
}

/** The next piece of a stream is the one after the last written. */
export function streamPieceInOrder(check: Check, r: MReq, p: Piece): void {
  check(
    p.tag === String(r.nextSeq),
    "chunkOrder",
    () => `${r.id} expected chunk ${r.nextSeq}, got ${p.tag}`,
  );
}
