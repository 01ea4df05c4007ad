// A raw TCP backend for the issue 24 tests: it reads HTTP/1.1 requests off
// real sockets and answers each with whatever bytes the test writes, so a
// backend that cuts an event in half, sends stray bytes after a complete
// answer, answers late on a kept-alive socket or never answers at all is
// exactly that on the wire.
import net from "node:net";

/** One request as the backend read it. */
export type RawRequest = {
  method: string;
  path: string;
  body: string;
  /** 1-based: the nth request overall, and on its socket. */
  nth: number;
  onSocket: number;
  /** Which connection carried it (1-based, in accept order). */
  conn: number;
};

export type RawBackend = {
  url: string;
  /** Requests read so far (GET /v1/models included). */
  requests: RawRequest[];
  /** Connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
};

/**
 * Listens on 127.0.0.1; `answer` gets each request with its socket. A GET of
 * /v1/models is answered with `models` unless `answer` handles it (returns true).
 */
export async function rawBackend(
  answer: (socket: net.Socket, r: RawRequest) => void,
  models: string[] = ["raw-model"],
): Promise<RawBackend> {
  const requests: RawRequest[] = [];
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const server = net.createServer((socket) => {
    const conn = ++connections;
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    let got = Buffer.alloc(0);
    let onSocket = 0;
    socket.on("data", (d: Buffer) => {
      got = Buffer.concat([got, d]);
      for (;;) {
        const headEnd = got.indexOf("\r\n\r\n");
        if (headEnd < 0) return;
        const head = got.subarray(0, headEnd).toString("latin1");
        const len = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (got.length < headEnd + 4 + len) return;
        const body = got.subarray(headEnd + 4, headEnd + 4 + len).toString();
        got = got.subarray(headEnd + 4 + len);
        const [method = "", path = ""] = head.split(" ");
        const r = {
          method,
          path,
          body,
          nth: requests.length + 1,
          onSocket: ++onSocket,
          conn,
        };
        requests.push(r);
        if (method === "GET" && path === "/v1/models") {
          const json = JSON.stringify({
            object: "list",
            data: models.map((id) => ({ id, object: "model" })),
          });
          socket.write(
            `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${json.length}\r\n\r\n${json}`,
          );
        } else answer(socket, r);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    connections: () => connections,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** One HTTP/1.1 chunk of `text`. */
export function httpChunk(text: string): string {
  return `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
}
