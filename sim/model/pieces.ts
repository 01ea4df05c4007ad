// What a virtual worker writes into a chunk or a body: `conn|request|i;` pieces
// (virtual_worker.ts `chunkText`), so the observer can tell whose bytes reached
// a client and in which order.

export type Piece = { conn: string; rid: string; tag: string };

/** The blank line that ends the event before a piece, and the `data: ` before it. */
const SSE_FRAMING = /^\s*(?:data: )?/;

/** Parses `conn|request|i;` pieces (a stream's come as `data: …\n\n` events). */
export function pieces(text: string): Piece[] {
  const out: Piece[] = [];
  for (const raw of text.split(";")) {
    const p = raw.replace(SSE_FRAMING, "");
    if (p.length === 0) continue;
    const [conn = "", rid = "", tag = ""] = p.split("|");
    out.push({ conn, rid, tag });
  }
  return out;
}
