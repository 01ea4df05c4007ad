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

function kept(
  from: Iterable<[string, string]>,
  keep: (lower: string) => boolean,
): Headers {
  const out: Headers = {};
  for (const [name, value] of from) {
    const lower = name.toLowerCase();
    if (keep(lower)) out[lower] = value;
  }
  return out;
}

/** A request's headers as a backend may see them, names lowercased. */
export function forwardableHeaders(headers: Headers): Headers {
  return kept(Object.entries(headers), (h) => FORWARDED_HEADERS.has(h));
}

/** A backend's answer headers as the worker passes them on (hop-by-hop dropped). */
export function passedOnHeaders(headers: Iterable<[string, string]>): Headers {
  return kept(headers, (h) => !HOP_HEADERS.has(h));
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
  return kept(
    Object.entries(headers),
    (h) => !RELAY_RESPONSE_HEADERS.has(h) && named?.has(h) !== true,
  );
}
