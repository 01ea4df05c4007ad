// A backend's JSON object at a URL, or null: what the lifecycle adapter reads
// to learn what a backend can do and holds. Any failure (no answer within 3 s,
// a non-2xx status, a body that is not a JSON object) is "this backend does not
// say", never an error: the caller falls back to what else the backend offers.
import type { BackendFetch } from "./backends.ts";

export type Json = Record<string, unknown>;

export async function backendJson(
  call: BackendFetch,
  url: string,
): Promise<Json | null> {
  try {
    const res = await call(url, { signal: AbortSignal.timeout(3_000) });
    if (!res.ok) {
      await res.body?.cancel();
      return null;
    }
    const v = await res.json();
    return typeof v === "object" && v !== null && !Array.isArray(v)
      ? v as Json
      : null;
  } catch {
    return null;
  }
}
