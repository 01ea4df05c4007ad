// One chat completion POSTed to a relay (or a stand-in) on 127.0.0.1 through a
// keep-alive agent: the request the CPU and transport probes repeat. node:http,
// not fetch: Deno's fetch body reader costs more than what the probes measure.
import type { IncomingMessage } from "node:http";
import http from "node:http";

/** Sends `body` (JSON) to `port`'s /v1/chat/completions; resolves with `onAnswer`'s verdict on the answer. */
export function postChat<T>(
  port: number,
  agent: http.Agent,
  body: string,
  onAnswer: (
    res: IncomingMessage,
    resolve: (v: T) => void,
    reject: (e: Error) => void,
  ) => void,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: "127.0.0.1",
      port,
      method: "POST",
      path: "/v1/chat/completions",
      agent,
      headers: {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
      },
    }, (res) => onAnswer(res, resolve, reject));
    req.on("error", reject);
    req.end(body);
  });
}
