// The platform reference of issue 31: a naive two-hop relay built only of
// Deno's native parts, about what a user would write in an afternoon. No
// queue, no limits, no cancellation, no requeue; one JSON text frame per
// message. `deno run --allow-net bench/naive/relay.ts server <port>` takes
// clients on `Deno.serve` and workers on `Deno.upgradeWebSocket` (/ws);
// `… worker <server-url> <backend-url>` connects with Deno's `WebSocket` and
// calls the backend with `fetch`. bench:e2e runs it as the path "naive" beside
// direct, nginx and ours: ours must beat it in every scenario.

type ToWorker = {
  id: number;
  method: string;
  path: string;
  headers: [string, string][];
  body: string;
};
type ToServer =
  | {
    id: number;
    kind: "whole";
    status: number;
    headers: [string, string][];
    text: string;
  }
  | { id: number; kind: "head"; status: number; headers: [string, string][] }
  | { id: number; kind: "chunk"; text: string }
  | { id: number; kind: "end" };

const HOP = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "host",
  "content-length",
]);
const keep = (h: Headers): [string, string][] =>
  [...h].filter(([k]) => !HOP.has(k.toLowerCase()));

function server(port: number): void {
  const workers: WebSocket[] = [];
  const open = new Map<number, (m: ToServer) => void>();
  let next = 0;
  let turn = 0;
  Deno.serve({ hostname: "127.0.0.1", port, onListen() {} }, async (req) => {
    const url = new URL(req.url);
    if (url.pathname === "/ws") {
      const { socket, response } = Deno.upgradeWebSocket(req);
      socket.onopen = () => workers.push(socket);
      socket.onclose = () => workers.splice(workers.indexOf(socket), 1);
      socket.onmessage = (e) => {
        const m = JSON.parse(e.data as string) as ToServer;
        open.get(m.id)?.(m);
      };
      return response;
    }
    if (url.pathname === "/health") {
      return Response.json({ workers_connected: workers.length });
    }
    const ws = workers[turn++ % Math.max(workers.length, 1)];
    if (ws === undefined) return new Response("no worker", { status: 503 });
    const id = next++;
    const body = await req.text();
    return await new Promise<Response>((resolve) => {
      let ctl: ReadableStreamDefaultController<Uint8Array> | null = null;
      const enc = new TextEncoder();
      const stream = new ReadableStream<Uint8Array>({
        start(c) {
          ctl = c;
        },
      });
      open.set(id, (m) => {
        switch (m.kind) {
          case "whole":
            open.delete(id);
            resolve(
              new Response(m.text, { status: m.status, headers: m.headers }),
            );
            return;
          case "head":
            resolve(
              new Response(stream, { status: m.status, headers: m.headers }),
            );
            return;
          case "chunk":
            // A client gone, or a body already whole (content-length), has
            // closed the stream: what is left has nowhere to go.
            try {
              ctl!.enqueue(enc.encode(m.text));
            } catch { /* closed */ }
            return;
          case "end":
            open.delete(id);
            try {
              ctl!.close();
            } catch { /* closed */ }
            return;
        }
      });
      const msg: ToWorker = {
        id,
        method: req.method,
        path: url.pathname + url.search,
        headers: keep(req.headers),
        body,
      };
      ws.send(JSON.stringify(msg));
    });
  });
}

function worker(serverUrl: string, backendUrl: string): void {
  const ws = new WebSocket(`${serverUrl.replace(/^http/, "ws")}/ws`);
  const send = (m: ToServer) => ws.send(JSON.stringify(m));
  ws.onmessage = async (e) => {
    const r = JSON.parse(e.data as string) as ToWorker;
    const res = await fetch(backendUrl + r.path, {
      method: r.method,
      headers: r.headers,
      ...(r.method === "GET" || r.method === "HEAD" ? {} : { body: r.body }),
    });
    // A plain answer is one message; a stream is a head, then its pieces.
    if (!(res.headers.get("content-type") ?? "").includes("event-stream")) {
      send({
        id: r.id,
        kind: "whole",
        status: res.status,
        headers: keep(res.headers),
        text: await res.text(),
      });
      return;
    }
    send({
      id: r.id,
      kind: "head",
      status: res.status,
      headers: keep(res.headers),
    });
    const dec = new TextDecoder();
    if (res.body !== null) {
      for await (const piece of res.body) {
        const text = dec.decode(piece, { stream: true });
        send({ id: r.id, kind: "chunk", text });
      }
    }
    send({ id: r.id, kind: "end" });
  };
  // The server may not listen yet: try again, as any worker would.
  ws.onclose = () => setTimeout(() => worker(serverUrl, backendUrl), 200);
}

const [role, a, b] = Deno.args;
if (role === "server" && a !== undefined) server(Number(a));
else if (role === "worker" && a !== undefined && b !== undefined) worker(a, b);
else {
  console.error(
    "usage: relay.ts server <port> | worker <server-url> <backend-url>",
  );
  Deno.exit(2);
}
