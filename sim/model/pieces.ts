// What a virtual worker writes into a chunk or a body: `conn|request|i;` pieces
// (virtual_worker.ts `chunkText`), so the observer can tell whose bytes reached
// a client and in which order.

export type Piece = { conn: string; rid: string; tag: string };

/** Parses `conn|request|i;` pieces. */
export function pieces(text: string): Piece[] {
  const out: Piece[] = [];
  for (const p of text.split(";")) {
    if (p.length === 0) continue;
    const [conn = "", rid = "", tag = ""] = p.split("|");
    out.push({ conn, rid, tag });
  }
  return out;
}
