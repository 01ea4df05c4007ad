// What a backend said about its prompt cache (spec 004 response headers), read
// from response_complete so the request's `requestFinished` can carry it to the
// metrics: X-Cache-Hit (true/false) and X-Cache-Tokens-Reused.
import type { CacheReport } from "../effect.ts";
import type { Headers } from "../vocabulary.ts";

/** Null when the backend sent no X-Cache-Hit: it reported nothing about its cache. */
export function cacheReportOf(headers: Headers): CacheReport | null {
  let hit: string | undefined;
  let reused: string | undefined;
  for (const k in headers) {
    // Issue 31: only a name of either length is lowercased and compared.
    if (k.length !== 11 && k.length !== 21) continue;
    const lower = k.toLowerCase();
    if (lower === "x-cache-hit") hit = headers[k];
    else if (lower === "x-cache-tokens-reused") reused = headers[k];
  }
  if (hit === undefined) return null;
  const n = Number(reused);
  return {
    hit: hit.trim().toLowerCase() === "true",
    tokensReused: Number.isFinite(n) && n > 0 ? n : 0,
  };
}
