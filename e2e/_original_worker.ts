// A worker speaking only the original ModelRelay dialect, in-process, for the
// end-to-end tests (issue 25): it registers with no `extensions` and no
// `endpoint_prefixes` field, answers pings, and forwards each `request` frame's
// text body to the backend with the frame's `method`, answering with one
// `response_complete` whose body is the backend's answer as text — what the
// Rust worker does for a non-streaming request; a streaming one's text leaves
// as `response_chunk` frames first.
export type OriginalWorker = {
  /** Request frames received, as parsed JSON. */
  requests: Record<string, unknown>[];
  /** The register_ack received. */
  ack: Promise<Record<string, unknown>>;
  close(): Promise<void>;
};

export function startOriginalWorker(opts: {
  serverUrl: string;
  secret: string;
  backendUrl: string;
  models: string[];
  name?: string;
}): OriginalWorker {
  const url = opts.serverUrl.replace(/^http/, "ws") +
    "/v1/worker/connect?provider=local";
  const ws = new WebSocket(url, {
    headers: { "x-worker-secret": opts.secret },
  } as unknown as string[]);
  const requests: Record<string, unknown>[] = [];
  let acked: (m: Record<string, unknown>) => void = () => {};
  const ack = new Promise<Record<string, unknown>>((r) => acked = r);
  ws.onopen = () =>
    ws.send(JSON.stringify({
      type: "register",
      worker_name: opts.name ?? "original",
      models: opts.models,
      max_concurrent: 4,
      protocol_version: "2026-04-bridge-v1",
    }));
  ws.onmessage = async (e) => {
    const m = JSON.parse(e.data as string) as Record<string, unknown>;
    if (m.type === "register_ack") return acked(m);
    if (m.type === "ping") {
      return ws.send(JSON.stringify({ type: "pong", current_load: 0 }));
    }
    if (m.type !== "request") return;
    requests.push(m);
    const method = typeof m.method === "string" ? m.method : "POST";
    const res = await fetch(opts.backendUrl + String(m.endpoint_path), {
      method,
      headers: (m.headers ?? {}) as Record<string, string>,
      ...(method === "GET" || method === "HEAD"
        ? {}
        : { body: String(m.body) }),
    });
    const headers: Record<string, string> = {};
    res.headers.forEach((v, k) => {
      if (k !== "content-length" && k !== "transfer-encoding") headers[k] = v;
    });
    let body = "";
    if (m.is_streaming === true && res.ok && res.body !== null) {
      // A stream, as the Rust worker sends one: response_chunk frames of the
      // decoded text as read, then a response_complete with the headers.
      const decoder = new TextDecoder();
      for await (const bytes of res.body) {
        const chunk = decoder.decode(bytes, { stream: true });
        if (chunk === "") continue;
        ws.send(JSON.stringify({
          type: "response_chunk",
          request_id: m.request_id,
          chunk,
        }));
      }
    } else body = await res.text();
    ws.send(JSON.stringify({
      type: "response_complete",
      request_id: m.request_id,
      status_code: res.status,
      headers,
      body,
    }));
  };
  return {
    requests,
    ack,
    close: () =>
      new Promise((resolve) => {
        if (ws.readyState === WebSocket.CLOSED) return resolve();
        ws.addEventListener("close", () => resolve());
        ws.close(1000);
      }),
  };
}
