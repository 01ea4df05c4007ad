// cacheAffinity (spec 004): a cache key goes to the worker that served it last
// unless that worker is busier than the least-loaded one by more than the margin.
import type { Model, MReq } from "../model/model.ts";
import type { Check } from "./catalog.ts";
import type { Dispatch } from "./dispatch.ts";

/** The key's remembered worker won: it was within the margin of the best free one. */
export function rememberedWithinMargin(
  { m, check, id, conn, r }: Dispatch,
  myLo: number,
  bestHi: number,
): void {
  check(
    myLo <= bestHi + m.c.affinityLoadMargin,
    "cacheAffinity",
    () =>
      `${id} (key ${r.cacheKey}) went to its remembered ${conn} at load ${myLo} while another free worker had load ${bestHi} (margin ${m.c.affinityLoadMargin})`,
  );
}

/**
 * The key's remembered worker was passed over: fine only if it was not certainly
 * free or was busier than the best by more than the margin. Checked only when
 * every load involved is settled (no cancel grace ending at this tick).
 */
export function passedOverOnlyWhenBusy(
  m: Model,
  check: Check,
  r: MReq,
  conn: string,
): void {
  const p = m.workers.get(
    m.affinity.get(`${r.model}\u0000${r.cacheKey}`)!,
  );
  if (p === undefined || !p.registered || p.draining) return;
  if (!p.acked.has(r.model) && !p.wildcard) return;
  if (!m.circuitLets(p) || !m.mayGo(r, p)) return;
  const exactFree = [...m.workers.values()].some((x) =>
    x.registered && !x.draining && x.acked.has(r.model) &&
    m.accepts(x, r) && m.load(x, true) < x.max
  );
  let bestLo = Infinity;
  for (const x of m.workers.values()) {
    if (!x.registered || x.draining || !m.accepts(x, r)) continue;
    if (!(x.acked.has(r.model) || (x.wildcard && !exactFree))) continue;
    const hi = m.load(x, true);
    if (hi !== m.load(x, false)) return;
    if (hi < x.max && hi < bestLo) bestLo = hi;
  }
  const pLoad = m.load(p, true);
  if (pLoad !== m.load(p, false) || pLoad >= p.max) return;
  if (!p.acked.has(r.model) && exactFree) return; // C42: `*` only when no exact match is free
  check(
    pLoad > bestLo + m.c.affinityLoadMargin,
    "cacheAffinity",
    () =>
      `${r.id} (key ${r.cacheKey}) went to ${conn}, but its remembered ${p.conn} was free at load ${pLoad} within margin ${m.c.affinityLoadMargin} of the best ${bestLo}`,
  );
}
