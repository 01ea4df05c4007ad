// Response header lines into one object, the way node:http's IncomingMessage
// builds `res.headers` (`_addHeaderLine` in node's and Deno's _http_incoming.js):
// the worker's copy of the backend's headers (backend_client.ts) must not
// depend on which client read them (issue 18).
//
// - names lowercased;
// - `set-cookie`: an array of every value;
// - `cookie`: values joined with "; ";
// - the single-valued headers node knows (FIRST_ONLY): the first value kept,
//   later duplicates dropped;
// - any other header: values joined with ", ".
//
// The tests (`typeof … === "string"`, `=== undefined`) are node's own, so odd
// names such as "constructor" end up the same way too.

/** Header name to its values, as `http.IncomingHttpHeaders`. */
export type ResponseHeaders = Record<string, string | string[]>;

/** Headers node keeps the first of (matchKnownFields' unprefixed names). */
const FIRST_ONLY = new Set([
  "age",
  "host",
  "from",
  "etag",
  "server",
  "referer",
  "expires",
  "location",
  "user-agent",
  "retry-after",
  "content-type",
  "max-forwards",
  "authorization",
  "last-modified",
  "content-length",
  "if-modified-since",
  "proxy-authorization",
  "if-unmodified-since",
]);

/** Adds one header line to `dest` (`field`: its name lowercased; `value` trimmed). */
export function addHeaderLine(
  dest: ResponseHeaders,
  field: string,
  value: string,
): void {
  const had = dest[field];
  if (field === "set-cookie") {
    if (had !== undefined) (had as string[]).push(value);
    else dest[field] = [value];
  } else if (FIRST_ONLY.has(field)) {
    if (had === undefined) dest[field] = value;
  } else if (typeof had === "string") {
    dest[field] = had + (field === "cookie" ? "; " : ", ") + value;
  } else {
    dest[field] = value;
  }
}
