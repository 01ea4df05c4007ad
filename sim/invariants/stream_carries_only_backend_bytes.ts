// streamCarriesOnlyBackendBytes (C15/C24, issue 14.4): a stream carries only its
// backend's bytes; a failure after the first byte (a status >= 400 completion)
// ends it with an SSE error event, never a spliced body or a normal end.
import type { Event } from "../../core/mod.ts";
import type { Check } from "./catalog.ts";

/** A failed completion after the stream started ends it with an error. */
export function failureEndsWithError(
  check: Check,
  id: string,
  e: Event | null,
  error: unknown,
): void {
  check(
    error !== null ||
      !(e?.kind === "completeReceived" && e.statusCode >= 400),
    "streamCarriesOnlyBackendBytes",
    () =>
      `${id}: a status ${
        (e as { statusCode?: number }).statusCode
      } completion after the stream started ended it normally`,
  );
}

/** A failed completion's body is never written into the stream. */
export function failureNotWritten(
  check: Check,
  id: string,
  e: Event | null,
): void {
  check(
    !(e?.kind === "completeReceived" && e.statusCode >= 400),
    "streamCarriesOnlyBackendBytes",
    () =>
      `${id}: the body of a status ${
        (e as { statusCode?: number }).statusCode
      } completion was written into its stream`,
  );
}
