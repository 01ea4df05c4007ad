// nothingAfterEnd (C20): nothing reaches a client after its request ended. An
// effect for a request the observer never saw breaks endsExactlyOnce instead.
import type { Model, MReq } from "../model/model.ts";
import type { Check } from "./catalog.ts";

/** The open request an effect (`what`) is for, or null (reported) if it is not open. */
export function openRequest(
  m: Model,
  check: Check,
  id: string,
  what: string,
): MReq | null {
  const r = m.reqs.get(id);
  if (r !== undefined) return r;
  check(
    false,
    m.ended.has(id) ? "nothingAfterEnd" : "endsExactlyOnce",
    () => `${what} for ${m.ended.has(id) ? "ended" : "unknown"} request ${id}`,
  );
  return null;
}
