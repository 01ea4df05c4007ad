// Differential test of the worker's HTTP/1.1 client (issue 18): the same
// backend bytes, split at random points across writes by a fake TCP backend,
// read through forwardToBackend by node:http (the reference) and by our own
// client; the outcomes must be the same: success or failure and its code,
// status, headers after copyHeaders, body and chunk bytes, token counts, and
// the request bytes the backend received.
//
// FUZZ_RUNS=<n> runs more cases (default 100); FUZZ_SEED=<n> replays one.
import assert from "node:assert/strict";
import net from "node:net";
import fc from "fast-check";
import {
  type AnswerSink,
  type BackendOutcome,
  forwardToBackendVia,
} from "../backend_client.ts";
import { requestFrame } from "../_test_worker.ts";
import type { RequestMessage } from "../../../core/protocol/mod.ts";

const RUNS = Number(Deno.env.get("FUZZ_RUNS") ?? 100);
const WRITE_GAP_MS = 10;
const SEED = Deno.env.get("FUZZ_SEED");

/** One scripted answer: the bytes, and where the backend splits its writes. */
type Script = { bytes: Uint8Array; cuts: number[] };

/**
 * A backend that reads one request (head and content-length body), records
 * it, writes the current script in pieces a few ms apart, and closes.
 */
async function scriptedBackend() {
  let script: Script = { bytes: new Uint8Array(), cuts: [] };
  const received: string[] = [];
  const closed: Promise<void>[] = [];
  const server = net.createServer((socket) => {
    let closedNow: () => void = () => {};
    closed.push(new Promise((r) => closedNow = r));
    socket.on("close", () => closedNow());
    socket.on("error", () => {});
    let got = Buffer.alloc(0);
    let answered = false;
    socket.on("data", async (d: Buffer) => {
      if (answered) return;
      got = Buffer.concat([got, d]);
      const headEnd = got.indexOf("\r\n\r\n");
      if (headEnd < 0) return;
      const m = /content-length: (\d+)/i.exec(
        got.subarray(0, headEnd).toString("latin1"),
      );
      if (got.length < headEnd + 4 + Number(m?.[1] ?? 0)) return;
      answered = true;
      received.push(got.toString("latin1"));
      const { bytes, cuts } = script;
      let from = 0;
      for (const cut of [...cuts, bytes.length]) {
        if (cut > from) socket.write(bytes.subarray(from, cut));
        from = Math.max(from, cut);
        // Far enough apart to arrive as separate reads for both clients: where
        // an answer breaks, what was sent before depends on the reads.
        await new Promise((r) => setTimeout(r, WRITE_GAP_MS));
      }
      socket.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    set(s: Script) {
      script = s;
    },
    /** Every connection so far closed: nothing left to reuse. */
    async settle() {
      await Promise.all(closed);
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

type Seen = { outcome: BackendOutcome; chunks: string };

async function run(
  via: "own" | "node",
  url: string,
  request: RequestMessage,
  over: Partial<AnswerSink>,
): Promise<Seen> {
  const chunks: string[] = [];
  const sink: AnswerSink = {
    chunk: (c) =>
      chunks.push(
        typeof c === "string" ? c : Buffer.from(c).toString("latin1"),
      ),
    bodyChunks: false,
    chunkBytes: false,
    hasRoom: () => true,
    ...over,
  };
  const outcome = await forwardToBackendVia(
    via,
    { url, apiKey: null },
    request,
    new AbortController().signal,
    sink,
  );
  return { outcome, chunks: chunks.join("") };
}

/**
 * What must agree: the message of a failure is left out (wording may differ),
 * so is the parser's message in a backend_protocol_error answer (C61).
 */
function comparable(s: Seen) {
  const o = s.outcome;
  if (isProtocolErrorAnswer(o)) {
    return { outcome: "backend_protocol_error", chunks: s.chunks };
  }
  return {
    outcome: o.kind === "failed" ? { kind: o.kind, code: o.code } : o,
    chunks: s.chunks,
  };
}

function isProtocolErrorAnswer(o: BackendOutcome): boolean {
  return o.kind === "completed" &&
    o.completion.body.includes('"backend_protocol_error"');
}

/**
 * The one difference on purpose (issue 24.5, C61): bytes after a complete
 * message fail the request in node (its parser reads them as a next response)
 * while ours delivers the answer and closes the connection.
 */
function strayBytesDelivered(node: Seen, own: Seen): boolean {
  const n = node.outcome;
  const nodeParseError = isProtocolErrorAnswer(n) ||
    (n.kind === "failed" && n.message.includes("Parse Error"));
  return nodeParseError && own.outcome.kind === "completed" &&
    !isProtocolErrorAnswer(own.outcome);
}

// ---- generators ----

const token = fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,12}$/);
const headerName = fc.oneof(
  { weight: 3, arbitrary: token },
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      "Content-Type",
      "content-type",
      "X-Request-Id",
      "x-trace",
      "Set-Cookie",
      "Cookie",
      "Date",
      "Vary",
      "ETag",
      "Server",
      "Keep-Alive",
      "Cache-Control",
      "Location",
      "Retry-After",
      "constructor",
      "__proto__",
    ),
  },
);
const visible = fc.stringMatching(/^[\x20-\x7e\t]{0,20}$/);
const headerValue = fc.oneof(
  { weight: 8, arbitrary: visible },
  {
    weight: 1,
    arbitrary: fc.string({ unit: "binary", maxLength: 8 }).map((s) =>
      s.replace(/[\r\n]/g, "")
    ),
  },
);
const bodyBytes = fc.oneof(
  fc.uint8Array({ maxLength: 300 }),
  fc.string({ unit: "grapheme", maxLength: 100 }).map((s) =>
    new TextEncoder().encode(s)
  ),
  fc.constant(
    new TextEncoder().encode(
      'data: {"choices":[{"delta":{"content":"hé"}}]}\n\ndata: {"usage":{"prompt_tokens":3,"completion_tokens":5}}\n\ndata: [DONE]\n\n',
    ),
  ),
);
const chunkExt = fc.oneof(
  { weight: 6, arbitrary: fc.constant("") },
  { weight: 1, arbitrary: token.map((t) => `;${t}`) },
  {
    weight: 1,
    arbitrary: fc.tuple(token, token).map(([a, b]) => `;${a}=${b}`),
  },
  { weight: 1, arbitrary: token.map((t) => `;${t}="q \\" v"`) },
);

type Framing =
  | { kind: "length"; extra: number }
  | {
    kind: "chunked";
    sizes: number[];
    exts: string[];
    trailers: string;
    last: boolean;
    upper: boolean;
  }
  | { kind: "close" }
  | { kind: "teOther" };

const framing: fc.Arbitrary<Framing> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("length" as const),
      extra: fc.oneof({ weight: 5, arbitrary: fc.constant(0) }, {
        weight: 1,
        arbitrary: fc.integer({ min: 1, max: 5 }),
      }),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("chunked" as const),
      sizes: fc.array(fc.integer({ min: 1, max: 80 }), { maxLength: 6 }),
      exts: fc.array(chunkExt, { minLength: 7, maxLength: 7 }),
      trailers: fc.oneof({ weight: 4, arbitrary: fc.constant("") }, {
        weight: 1,
        arbitrary: fc.constant("X-Trailer: t\r\n"),
      }),
      last: fc.oneof({ weight: 6, arbitrary: fc.constant(true) }, {
        weight: 1,
        arbitrary: fc.constant(false),
      }),
      upper: fc.boolean(),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("close" as const) }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("teOther" as const) }),
  },
);

const answer = fc.record({
  interim: fc.oneof({ weight: 5, arbitrary: fc.constant("") }, {
    weight: 1,
    arbitrary: fc.constantFrom(
      "HTTP/1.1 100 Continue\r\n\r\n",
      "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
    ),
  }),
  version: fc.oneof({ weight: 8, arbitrary: fc.constant("1.1") }, {
    weight: 1,
    arbitrary: fc.constantFrom("1.0", "2.0", "1.2", "0.9"),
  }),
  status: fc.oneof({ weight: 6, arbitrary: fc.constant(200) }, {
    weight: 3,
    arbitrary: fc.constantFrom(201, 204, 304, 400, 404, 429, 500, 503),
  }),
  reason: fc.constantFrom("OK", "", " ", "Some Reason", "naïve"),
  headers: fc.array(fc.tuple(headerName, headerValue), { maxLength: 8 }),
  connection: fc.constantFrom(
    "",
    "Connection: close\r\n",
    "Connection: keep-alive\r\n",
  ),
  framing,
  body: bodyBytes,
  /** Rarely: one byte changed, to see both clients refuse (or take) the same damage. */
  damage: fc.oneof({ weight: 6, arbitrary: fc.constant(null) }, {
    weight: 1,
    arbitrary: fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })),
  }),
});

type Answer = typeof answer extends fc.Arbitrary<infer T> ? T : never;

function render(a: Answer): Uint8Array {
  const enc = (s: string) => Buffer.from(s, "latin1");
  let head = `${a.interim}HTTP/${a.version} ${a.status}${
    a.reason === "" ? "" : " " + a.reason
  }\r\n`;
  for (const [n, v] of a.headers) head += `${n}: ${v}\r\n`;
  head += a.connection;
  const body = Buffer.from(a.body);
  const f: Framing = a.framing;
  let out: Buffer = Buffer.alloc(0);
  switch (f.kind) {
    case "length":
      out = Buffer.concat([
        enc(`${head}Content-Length: ${body.length + f.extra}\r\n\r\n`),
        body,
      ]);
      break;
    case "close":
      out = Buffer.concat([enc(`${head}\r\n`), body]);
      break;
    case "teOther":
      out = Buffer.concat([
        enc(`${head}Transfer-Encoding: gzip\r\n\r\n`),
        body,
      ]);
      break;
    case "chunked": {
      const parts: Buffer[] = [
        enc(`${head}Transfer-Encoding: chunked\r\n\r\n`),
      ];
      let at = 0;
      f.sizes.forEach((size: number, i: number) => {
        const piece = body.subarray(at, at + size);
        at += piece.length;
        if (piece.length === 0) return;
        const hex = piece.length.toString(16);
        parts.push(
          enc(`${f.upper ? hex.toUpperCase() : hex}${f.exts[i] ?? ""}\r\n`),
          piece,
          enc("\r\n"),
        );
      });
      if (f.last) parts.push(enc(`0${f.exts[6]}\r\n${f.trailers}\r\n`));
      out = Buffer.concat(parts);
      break;
    }
  }
  if (a.damage !== null && out.length > 0) {
    out = Buffer.from(out);
    out[a.damage[0] % out.length] = a.damage[1];
  }
  return out;
}

const kinds = fc.constantFrom(
  { name: "buffered", body: { stream: false }, over: {} },
  {
    name: "body-chunks-v1",
    body: { stream: false },
    over: { bodyChunks: true },
  },
  { name: "stream as text", body: { stream: true }, over: {} },
  {
    name: "stream as bytes",
    body: { stream: true },
    over: { chunkBytes: true },
  },
);

Deno.test("issue 18: our HTTP/1.1 client and node:http agree on random answers split anywhere", async () => {
  const backend = await scriptedBackend();
  try {
    await fc.assert(
      fc.asyncProperty(
        answer,
        fc.array(fc.nat(), { maxLength: 4 }),
        kinds,
        async (a, cutsRaw, kind) => {
          const bytes = render(a);
          const cuts = [...new Set(cutsRaw.map((c) => c % (bytes.length + 1)))]
            .sort((x, y) => x - y);
          backend.set({ bytes, cuts });
          const request = requestFrame("r1", kind.body, {
            headers: { "x-request-id": "abc", "user-agent": "ua/1" },
          }) as RequestMessage;
          const seen: Record<string, ReturnType<typeof comparable>> = {};
          const raw: Record<string, Seen> = {};
          const from = backend.received.length;
          for (const via of ["node", "own"] as const) {
            raw[via] = await run(via, backend.url, request, kind.over);
            seen[via] = comparable(raw[via]);
            await backend.settle();
          }
          if (strayBytesDelivered(raw.node!, raw.own!)) return;
          assert.deepEqual(
            seen.own,
            seen.node,
            `${kind.name}: ${
              JSON.stringify(Buffer.from(bytes).toString("latin1"))
            } cut at ${cuts}`,
          );
          const [byNode, byOwn] = backend.received.slice(from);
          assert.equal(byOwn, byNode, "the same request bytes");
        },
      ),
      { numRuns: RUNS, ...(SEED === undefined ? {} : { seed: Number(SEED) }) },
    );
  } finally {
    await backend.close();
  }
});
