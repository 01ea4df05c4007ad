// A raw backend for issue 24's memory tests and bench/mem_probe.ts (and the
// client they both ask it through, `bigChat`): node:http on loopback, answering `GET /v1/models` and every POST with one non-streaming
// chat completion of exactly `bytes` bytes (Content-Length, written in 1 MiB
// pieces as the socket drains), so the answer's size is the test's to choose
// and costs this process next to nothing.
import http from "node:http";
import type { AddressInfo } from "node:net";

export type BigBodyBackend = {
  url: string;
  /** POSTs answered so far (each with the whole body). */
  answered(): number;
  close(): Promise<void>;
};

const HEAD =
  '{"id":"chatcmpl-big","object":"chat.completion","created":1,"model":"big-model","choices":[{"index":0,"message":{"role":"assistant","content":"';
const TAIL =
  '"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}';
const PIECE = 1024 * 1024;

/** The body's bytes, in pieces of at most 1 MiB: head, filler, tail. */
function* pieces(bytes: number): Generator<Uint8Array> {
  const enc = new TextEncoder();
  const head = enc.encode(HEAD);
  const tail = enc.encode(TAIL);
  if (bytes < head.length + tail.length) throw new Error("body too small");
  yield head;
  const filler = new Uint8Array(PIECE).fill(0x61); // "a"
  let left = bytes - head.length - tail.length;
  while (left > 0) {
    const n = Math.min(left, PIECE);
    yield n === PIECE ? filler : filler.subarray(0, n);
    left -= n;
  }
  yield tail;
}

export async function startBigBodyBackend(
  bytes: number,
  model = "big-model",
): Promise<BigBodyBackend> {
  let answered = 0;
  const server = http.createServer((req, res) => {
    if (req.method === "GET") {
      req.resume();
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({
        object: "list",
        data: [{ id: model, object: "model", owned_by: "raw" }],
      }));
      return;
    }
    req.resume();
    req.on("end", () => {
      res.writeHead(200, {
        "content-type": "application/json",
        "content-length": String(bytes),
      });
      const it = pieces(bytes);
      const pump = () => {
        for (;;) {
          const next = it.next();
          if (next.done) {
            answered++;
            res.end();
            return;
          }
          if (!res.write(next.value)) {
            res.once("drain", pump);
            return;
          }
        }
      };
      pump();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    answered: () => answered,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

export type BigAnswer = {
  status: number;
  bytes: number;
  /** The body's first `headChars` characters (at least). */
  head: string;
  retry: string;
};

/** One non-streaming chat request to `serverUrl`; the body is counted, only its
 * start is kept. */
export function bigChat(
  serverUrl: string,
  model: string,
  headChars = 300,
): Promise<BigAnswer> {
  const u = new URL(serverUrl);
  const body = JSON.stringify({
    model,
    messages: [{ role: "user", content: "a lot" }],
  });
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: u.hostname,
      port: Number(u.port),
      path: "/v1/chat/completions",
      method: "POST",
      headers: {
        "content-type": "application/json",
        "content-length": String(new TextEncoder().encode(body).length),
      },
    }, (res) => {
      let bytes = 0;
      let head = "";
      res.on("data", (b: Uint8Array) => {
        bytes += b.length;
        if (head.length < headChars) head += new TextDecoder().decode(b);
      });
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          bytes,
          head: head.slice(0, headChars),
          retry: String(res.headers["retry-after"] ?? ""),
        }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}
