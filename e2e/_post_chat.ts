// A raw client's chat completion: `body` POSTed as JSON to an origin's
// /v1/chat/completions with fetch, no SDK between the test and the bytes.
// `headers` are sent besides the JSON content type.

export function postChat(
  origin: string,
  body: Record<string, unknown>,
  init: { headers?: Record<string, string>; signal?: AbortSignal } = {},
): Promise<Response> {
  return fetch(`${origin}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...init.headers },
    body: JSON.stringify(body),
    ...(init.signal === undefined ? {} : { signal: init.signal }),
  });
}
