// Which headers cross which hop (issue 34: each rule in one place). A request's
// headers reach the backend only from an allow-list, whoever filters them (the
// server's core when it dispatches, our worker again before its backend call,
// since a foreign server may send more). An answer's headers pass back minus
// the hop-by-hop ones (RFC 9110 7.6.1) and the length, which every hop sets for
// itself; the relay also drops the backend's content encoding and CORS, which
// are its own to set.
import type { Headers } from "../vocabulary.ts";

/**
 * Request headers a worker may see (C13), plus the spec 004 request headers the
 * backend acts on; everything else stays at the relay.
 */
export const FORWARDED_HEADERS: ReadonlySet<string> = new Set([
  "authorization",
  "content-type",
  "openai-organization",
  "x-api-key",
  "anthropic-version",
  "anthropic-beta",
  "x-tenant-id",
  "x-priority",
  "x-cache-mode",
  "x-cache-tag",
  // Issue 26: W3C trace context (the relay sets traceparent to its own span).
  "traceparent",
  "tracestate",
]);

/** Hop-by-hop headers and the length: each hop's own, never copied across one. */
export const HOP_HEADERS: ReadonlySet<string> = new Set([
  "host",
  "connection",
  "keep-alive",
  "transfer-encoding",
  "content-length",
  "upgrade",
  "te",
  "trailer",
  "proxy-authenticate",
  "proxy-authorization",
]);

/** What the relay sets on a client's answer itself, whatever the backend said. */
const RELAY_RESPONSE_HEADERS: ReadonlySet<string> = new Set([
  ...HOP_HEADERS,
  "content-encoding",
  // CORS is the relay's policy (CORS_ALLOW_ORIGINS), not the backend's:
  // llama-server and vLLM answer `*`, which would override a narrower list.
  "access-control-allow-origin",
  "access-control-allow-credentials",
  "access-control-allow-methods",
  "access-control-allow-headers",
  "access-control-expose-headers",
  "access-control-max-age",
]);

/**
 * `headers` named in `keep` (null: all) and in neither `drop` nor `named`,
 * names lowercased. A loop over the record's keys: no entries array, no pair
 * per header, no closure per call (issue 31: this runs on every request and
 * every answer).
 */
function keptOf(
  headers: Headers,
  keep: ReadonlySet<string> | null,
  drop: ReadonlySet<string> | null,
  named: ReadonlySet<string> | null = null,
): Headers {
  const out: Headers = {};
  for (const name in headers) {
    const lower = name.toLowerCase();
    if (keep?.has(lower) === false) continue;
    if (drop?.has(lower) === true || named?.has(lower) === true) continue;
    out[lower] = headers[name]!;
  }
  return out;
}

/** A request's headers as a backend may see them, names lowercased. */
export function forwardableHeaders(headers: Headers): Headers {
  return keptOf(headers, FORWARDED_HEADERS, null);
}

/**
 * A backend's answer headers as the worker passes them on (hop-by-hop
 * dropped), a repeated header's values joined with ", ". From the parsed
 * record itself (issue 31: no entries array, no pair per header).
 */
export function passedOnHeaders(
  headers: Readonly<Record<string, string | readonly string[] | undefined>>,
): Headers {
  const out: Headers = {};
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    if (HOP_HEADERS.has(lower)) continue;
    out[lower] = typeof value === "string" ? value : value.join(", ");
  }
  return out;
}

/**
 * A backend's answer headers as the relay writes them to its client: none of
 * the relay's own, nor any its `Connection` header names (issue 33.11:
 * hop-by-hop by RFC 9110 7.6.1).
 */
export function clientResponseHeaders(headers: Headers): Headers {
  let named: Set<string> | null = null;
  for (const name in headers) {
    if (name.toLowerCase() !== "connection") continue;
    named = new Set(
      headers[name]!.split(",").map((t) => t.trim().toLowerCase()),
    );
  }
  return keptOf(headers, null, RELAY_RESPONSE_HEADERS, named);
}
