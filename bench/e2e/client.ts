// The load generator: node:http requests (Deno's fetch body reader costs ~30 µs
// per read, measured; node:http reads the same stream 4-8x faster, so the
// client is not what limits the direct path). Every SSE event is read and
// checked: chunk order and a proper end ([DONE] after a finish_reason).
import http from "node:http";

/**
 * The ways to the backend that every timed scenario compares: ours, direct,
 * nginx (issue 18), the naive relay of Deno's native parts (issue 31,
 * bench/naive/relay.ts) and an older commit's relay (issue 31, `--baseline`).
 */
export type PathName = "relay" | "direct" | "nginx" | "naive" | "base";
/** Base order; each round rotates it by one, so every path takes every slot. */
export const PATH_NAMES: readonly PathName[] = [
  "direct",
  "relay",
  "nginx",
  "naive",
  "base",
];

export type Target = {
  name: PathName;
  host: string;
  port: number;
};

/**
 * How to check a stream: `mock` knows mock/backend.ts's canned answer and checks
 * every word in order; `stamp` checks bench/e2e/stamp_backend.ts's sequence
 * numbers and collects per-chunk latency; `generic` (a real backend) only checks
 * that each event is JSON and the stream ends with [DONE].
 */
export type Checker = "mock" | "stamp" | "generic";

export type StreamResult = {
  chunks: number;
  bytes: number;
  /** ms from sending the request to the first content chunk / to [DONE]. */
  ttfcMs: number;
  totalMs: number;
  /** stamp only: arrival minus the backend's write time of each chunk, ms. */
  lagsMs: number[];
};

export type StreamOptions = {
  path?: string;
  model: string;
  maxTokens: number;
  delayMs?: number;
  checker: Checker;
  agent: http.Agent;
  /** Aborts the request (the result then rejects with an AbortError). */
  signal?: AbortSignal;
  /** Called when a 200 answer's headers arrived (the stream is open). */
  onResponse?: () => void;
  timeoutMs: number;
};

const MOCK_ANSWER =
  "The quick brown fox jumps over the lazy dog while the relay streams every word in order.";
const MOCK_WORDS = (MOCK_ANSWER.match(/\S+\s*/g) ?? []).map((w) => w.trim());

function wallMs(): number {
  return performance.timeOrigin + performance.now();
}

export function newAgent(): http.Agent {
  return new http.Agent({ keepAlive: true, maxSockets: Infinity });
}

/** Extracts "content":"…" without a JSON parse when it holds no escapes. */
function contentOf(data: string): string | null {
  const at = data.indexOf('"content":"');
  if (at === -1) return null;
  const from = at + 11;
  const to = data.indexOf('"', from);
  if (to === -1) return null;
  const raw = data.slice(from, to);
  if (raw.includes("\\")) {
    return (JSON.parse(data) as {
      choices: { delta: { content?: string } }[];
    }).choices[0]?.delta.content ?? null;
  }
  return raw;
}

class StreamCheck {
  chunks = 0;
  done = false;
  finished = false;
  firstAt = -1;
  lags: number[] = [];
  error: string | null = null;
  constructor(readonly checker: Checker) {}

  event(ev: string): void {
    if (this.error !== null) return;
    if (this.done) {
      this.error = "data after [DONE]";
      return;
    }
    // One `data:` line per event from all three backends; ignore `event:` lines.
    let data = ev;
    if (!ev.startsWith("data: ")) {
      const at = ev.indexOf("\ndata: ");
      if (at === -1) return;
      data = ev.slice(at + 1);
    }
    data = data.slice(6);
    if (data === "[DONE]") {
      if (!this.finished) this.error = "[DONE] without a finish_reason";
      this.done = true;
      return;
    }
    if (this.checker === "generic") {
      const v = JSON.parse(data) as {
        choices?: { delta?: { content?: string }; finish_reason?: unknown }[];
      };
      const c = v.choices?.[0];
      if (typeof c?.delta?.content === "string" && c.delta.content !== "") {
        this.content();
      }
      if (c?.finish_reason !== null && c?.finish_reason !== undefined) {
        this.finished = true;
      }
      return;
    }
    if (data.includes('"finish_reason":"stop"')) {
      this.finished = true;
      return;
    }
    const content = contentOf(data);
    if (content === null || content === "") return; // the role chunk
    if (this.checker === "mock") {
      const want = MOCK_WORDS[this.chunks % MOCK_WORDS.length];
      if (content.trim() !== want) {
        this.error = `chunk ${this.chunks}: got "${content}", want "${want}"`;
      }
    } else {
      // {"i":<n>,"t":<ms>,"choices":…}
      const tAt = data.indexOf(',"t":');
      const i = Number(data.slice(5, tAt));
      const t = Number(data.slice(tAt + 5, data.indexOf(",", tAt + 5)));
      if (i !== this.chunks) this.error = `chunk ${this.chunks}: got i=${i}`;
      this.lags.push(wallMs() - t);
    }
    this.content();
  }

  content(): void {
    if (this.chunks === 0) this.firstAt = performance.now();
    this.chunks++;
  }
}

/** The JSON body of every benchmark chat request. */
function benchChat(model: string, maxTokens: number, stream: boolean): string {
  return JSON.stringify({
    model,
    stream,
    max_tokens: maxTokens,
    messages: [{ role: "user", content: "bench" }],
  });
}

/** One streaming request, read to the end and checked. */
export function streamOnce(
  target: Target,
  o: StreamOptions,
): Promise<StreamResult> {
  const body = benchChat(o.model, o.maxTokens, true);
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "content-length": String(body.length),
  };
  if (o.delayMs !== undefined) headers["x-mock-delay-ms"] = String(o.delayMs);
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const check = new StreamCheck(o.checker);
    let bytes = 0;
    let settled = false;
    const finish = (err: Error | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err !== null) return reject(err);
      if (check.error !== null) {
        return reject(new Error(`${target.name}: ${check.error}`));
      }
      if (!check.done) {
        return reject(new Error(`${target.name}: stream ended without [DONE]`));
      }
      if (o.checker !== "generic" && check.chunks !== o.maxTokens) {
        return reject(
          new Error(
            `${target.name}: ${check.chunks} chunks, want ${o.maxTokens}`,
          ),
        );
      }
      resolve({
        chunks: check.chunks,
        bytes,
        ttfcMs: check.firstAt - start,
        totalMs: performance.now() - start,
        lagsMs: check.lags,
      });
    };
    const timer = setTimeout(() => {
      req.destroy();
      finish(
        new Error(`${target.name}: stream timed out after ${o.timeoutMs} ms`),
      );
    }, o.timeoutMs);
    const req = http.request({
      host: target.host,
      port: target.port,
      path: o.path ?? "/v1/chat/completions",
      method: "POST",
      agent: o.agent,
      headers,
      ...(o.signal === undefined ? {} : { signal: o.signal }),
    }, (res) => {
      if (res.statusCode !== 200) {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (s: string) => text += s);
        res.on(
          "end",
          () =>
            finish(
              new Error(`${target.name}: status ${res.statusCode}: ${text}`),
            ),
        );
        return;
      }
      o.onResponse?.();
      res.setEncoding("utf8");
      let buf = "";
      res.on("data", (s: string) => {
        bytes += s.length;
        buf += s;
        if (o.checker === "generic" && buf.includes("\r")) {
          buf = buf.replaceAll("\r\n", "\n");
        }
        let from = 0;
        for (let end = buf.indexOf("\n\n"); end !== -1;) {
          check.event(buf.slice(from, end));
          from = end + 2;
          end = buf.indexOf("\n\n", from);
        }
        buf = from === 0 ? buf : buf.slice(from);
      });
      res.on("end", () => finish(null));
      res.on("error", (e) => finish(e));
    });
    req.on("error", (e) => finish(e));
    req.end(body);
  });
}

export type PostResult = { totalMs: number };

/** One small non-streaming request, read whole and checked. */
export function postOnce(
  target: Target,
  o: {
    model: string;
    maxTokens: number;
    checker: Checker;
    agent: http.Agent;
    timeoutMs: number;
  },
): Promise<PostResult> {
  const body = benchChat(o.model, o.maxTokens, false);
  return postJsonTimed(
    target,
    "/v1/chat/completions",
    body,
    o,
    (status, text) => {
      if (status !== 200) throw new Error(`status ${status}: ${text}`);
      const v = JSON.parse(text) as {
        choices: { message: { content: string } }[];
      };
      const content = v.choices[0]?.message.content ?? "";
      if (
        o.checker === "mock" &&
        content.trim() !== MOCK_WORDS.slice(0, o.maxTokens).join(" ")
      ) {
        throw new Error(`wrong body ${text}`);
      }
      if (content === "") throw new Error(`empty answer ${text}`);
    },
  );
}

/**
 * One POST /v1/embeddings of `inputs` (issue 25), read whole and checked: a
 * 200 whose `data` has one embedding per input.
 */
export function embedOnce(
  target: Target,
  o: { model: string; inputs: string[]; agent: http.Agent; timeoutMs: number },
): Promise<PostResult> {
  const body = JSON.stringify({
    model: o.model,
    input: o.inputs,
    encoding_format: "float",
  });
  return postJsonTimed(target, "/v1/embeddings", body, o, (status, text) => {
    const v = JSON.parse(text) as { data?: unknown[] };
    if (status !== 200 || v.data?.length !== o.inputs.length) {
      throw new Error(`status ${status}: ${text.slice(0, 200)}`);
    }
  });
}

/**
 * One POST of the JSON `body` to `path`, read whole; `check` throws when the
 * answer is wrong (its message is prefixed with the path's name). Resolves
 * with the time from the start to the end of the answer.
 */
function postJsonTimed(
  target: Target,
  path: string,
  body: string,
  o: { agent: http.Agent; timeoutMs: number },
  check: (status: number | undefined, text: string) => void,
): Promise<PostResult> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`${target.name}: request timed out`));
    }, o.timeoutMs);
    const req = http.request({
      host: target.host,
      port: target.port,
      path,
      method: "POST",
      agent: o.agent,
      headers: {
        "content-type": "application/json",
        "content-length": String(new TextEncoder().encode(body).length),
      },
    }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (s: string) => text += s);
      res.on("end", () => {
        clearTimeout(timer);
        try {
          check(res.statusCode, text);
        } catch (e) {
          return reject(new Error(`${target.name}: ${(e as Error).message}`));
        }
        resolve({ totalMs: performance.now() - start });
      });
      res.on("error", (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
    req.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    req.end(body);
  });
}

/**
 * Runs `task` `total` times with at most `concurrency` at once; stops starting new
 * tasks after `deadlineMs`. Returns the results of the tasks that ran.
 */
export async function pool<T>(
  total: number,
  concurrency: number,
  deadlineMs: number,
  task: (i: number) => Promise<T>,
): Promise<T[]> {
  const out: T[] = [];
  const stopAt = performance.now() + deadlineMs;
  let next = 0;
  const lane = async () => {
    while (next < total && performance.now() < stopAt) {
      out.push(await task(next++));
    }
  };
  await Promise.all(
    Array.from({ length: Math.min(concurrency, total) }, lane),
  );
  return out;
}
