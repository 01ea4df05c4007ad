// noSplice (C24): a stream is never spliced from two workers, and a request
// never stays assigned to a worker that is gone.
import type { Model, MReq } from "../model/model.ts";
import type { Piece } from "../model/pieces.ts";
import type { Check } from "./catalog.ts";

/** A whole response body holds only its assigned worker's pieces for it. */
export function bodyPieceFromAssigned(check: Check, r: MReq, p: Piece): void {
  check(
    p.conn === r.conn && p.rid === r.id,
    "noSplice",
    () =>
      `response body of ${r.id} has a piece from ${p.conn}/${p.rid}, assigned ${r.conn}`,
  );
}

/** Every chunk of a stream comes from the worker of its first chunk. */
export function streamFromOneWorker(check: Check, r: MReq, p: Piece): void {
  check(
    r.chunkConn === null || p.conn === r.chunkConn,
    "noSplice",
    () => `${r.id} got a chunk from ${p.conn} after chunks from ${r.chunkConn}`,
  );
}

/** After a worker left, no running request is still assigned to it (it was requeued or ended). */
export function notOnClosedWorker(m: Model, check: Check, r: MReq): void {
  check(
    m.workers.has(r.conn!),
    "noSplice",
    () => `${r.id} (${r.status}) still assigned to closed worker ${r.conn}`,
  );
}
