// Test-only: fast-check generators for both doors of the relay (issue 15):
// HTTP requests a client might send, and WebSocket traffic a worker might send,
// skewed towards what breaks parsers (wrong types, huge numbers, deep nesting,
// invalid UTF-8, truncation, oversize, frames in the wrong state, floods).
import fc from "fast-check";
import {
  SERVER_MESSAGE_TYPES,
  WORKER_MESSAGE_TYPES,
} from "../../core/protocol/mod.ts";

/**
 * Runs per door: FUZZ_RUNS if set, else FUZZ_DEFAULT_RUNS (`deno task fuzz`
 * sets 50,000), else the CI count.
 */
export function fuzzRuns(ciRuns: number): number {
  for (const name of ["FUZZ_RUNS", "FUZZ_DEFAULT_RUNS"]) {
    const raw = Deno.env.get(name);
    if (raw !== undefined && raw !== "") return Number(raw);
  }
  return ciRuns;
}

/** Fixed in CI so a failure replays; FUZZ_SEED picks another universe. */
export function fuzzSeed(): number {
  const raw = Deno.env.get("FUZZ_SEED");
  return raw === undefined || raw === "" ? 15 : Number(raw);
}

const enc = new TextEncoder();

/** Short printable ASCII: what fetch lets through as a header value. */
const printable = (max: number) =>
  fc.string({
    unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) =>
      String.fromCharCode(c)
    ),
    maxLength: max,
  });

const anyText = (max: number) =>
  fc.oneof(
    printable(max),
    fc.string({ unit: "grapheme", maxLength: max }),
    fc.string({ unit: "binary", maxLength: max }),
  );

export const ROUTES = [
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/responses",
  "/v1/messages",
  "/health",
  "/v1/models",
  "/v1/capabilities",
  "/metrics",
  "/admin/keys",
  "/admin/workers",
  "/admin/stats",
  "/admin/keys/some-id",
  "/v1/models/load",
  "/v1/models/load/some-task",
  "/v1/models/unload",
  "/v1/cache/flush",
  "/dashboard",
  "/setup",
  "/setup/status",
  "/v1/worker/connect",
  "/",
  "/v1",
];

const path = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...ROUTES) },
  {
    weight: 2,
    arbitrary: fc.tuple(
      fc.constantFrom(...ROUTES),
      fc.constantFrom(
        "",
        "?",
        "?x=1",
        "?worker=%zz",
        "?a=%00",
        "/",
        "/..",
        "#f",
      ),
    ).map(([p, s]) => p + s),
  },
  {
    weight: 1,
    arbitrary: fc.array(
      fc.oneof(
        fc.stringMatching(/^[a-z0-9._~-]{0,12}$/),
        fc.constantFrom("..", ".", "%2e%2e", "%zz", "%00", "%ff", "v1"),
      ),
      { maxLength: 6 },
    ).map((parts) => "/" + parts.join("/")),
  },
);

/** Values a model name, a flag or a message list should not be. */
const wrongValue = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double(),
  fc.constantFrom(1e308, -0, 2 ** 53 + 1),
  anyText(20),
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.dictionary(printable(5), fc.integer(), { maxKeys: 3 }),
);

const model = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom("m1", "nope", "*", "", " m1 ") },
  { weight: 1, arbitrary: wrongValue },
);

/** A JSON object that looks like an inference body, often subtly wrong. */
const inferenceObject = fc.record(
  {
    model,
    stream: fc.oneof(fc.constant(false), wrongValue),
    messages: fc.oneof(
      fc.constant([{ role: "user", content: "hi" }]),
      wrongValue,
    ),
    max_tokens: fc.oneof(fc.integer(), wrongValue),
    user: anyText(10),
    prompt_cache_key: anyText(80),
  },
  { requiredKeys: [] },
);

const deep = fc.tuple(fc.integer({ min: 1, max: 20_000 }), fc.boolean()).map((
  [n, arr],
) =>
  arr ? "[".repeat(n) + "]".repeat(n) : '{"a":'.repeat(n) + "1" + "}".repeat(n)
);

/** Request bodies as bytes. */
export const body = (oversize: number): fc.Arbitrary<Uint8Array> =>
  fc.oneof(
    {
      weight: 5,
      arbitrary: inferenceObject.map((o) => enc.encode(JSON.stringify(o))),
    },
    {
      weight: 2,
      arbitrary: fc.jsonValue().map((v) => enc.encode(JSON.stringify(v))),
    },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }) }, // invalid UTF-8 and worse
    { weight: 1, arbitrary: deep.map((s) => enc.encode(s)) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        '{"model":"m1","max_tokens":1e99999}',
        '{"model":"m1","n":123456789012345678901234567890}',
        '{"model":"m1",',
        '{"model":"m1"}garbage',
        '{"model":"\\ud800"}',
        "",
        "null",
        "[]",
        '"m1"',
        '{"name":"k"}',
        '{"modelId":"m1","verifiedOpToken":"x"}',
      ).map((s) => enc.encode(s)),
    },
    {
      weight: 1,
      arbitrary: fc.integer({ min: oversize + 1, max: oversize * 2 }).map((n) =>
        new Uint8Array(n).fill(0x61)
      ),
    },
  );

const HEADER_NAMES = [
  "content-type",
  "authorization",
  "x-api-key",
  "x-tenant-id",
  "x-priority",
  "x-cache-mode",
  "x-cache-tag",
  "anthropic-version",
  "x-forwarded-for",
  "x-worker-secret",
  "accept",
  "origin",
];

const headerValue = fc.oneof(
  printable(40),
  fc.constantFrom(
    "application/json",
    "Bearer mr-xxxxxxxx",
    "Bearer ",
    "high",
    "low",
    "none",
    "prefix",
    "1.2.3.4, 5.6.7.8",
    "x".repeat(300),
  ),
);

export const headers = fc.dictionary(
  fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...HEADER_NAMES) },
    { weight: 1, arbitrary: fc.stringMatching(/^x-[a-z0-9-]{1,20}$/) },
  ),
  headerValue,
  { maxKeys: 6 },
);

export type FetchCase = {
  kind: "fetch";
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Uint8Array;
};

export type RawCase = {
  kind: "raw";
  /** Bytes as sent; the client then half-closes. */
  bytes: Uint8Array;
};

export type HttpCase = FetchCase | RawCase;

const method = fc.constantFrom(
  "GET",
  "POST",
  "POST",
  "POST",
  "PUT",
  "DELETE",
  "PATCH",
  "OPTIONS",
  "HEAD",
  "FROB",
);

/** What `fetch` can send: well-framed requests with any content. */
const fetchCase = (oversize: number): fc.Arbitrary<FetchCase> =>
  fc.record({ method, path, headers, body: body(oversize) }).map((c) => ({
    kind: "fetch" as const,
    ...c,
  }));

/** What only a raw socket can send: truncated bodies, lies about length, garbage framing. */
const rawCase = (oversize: number): fc.Arbitrary<RawCase> =>
  fc.oneof(
    // A request whose body stops short of its Content-Length.
    fc.record({
      path,
      body: body(oversize),
      cut: fc.nat(),
    }).map(({ path, body, cut }) => {
      const sent = body.subarray(0, body.length === 0 ? 0 : cut % body.length);
      const head = `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: ${
        body.length + 1
      }\r\n\r\n`;
      return join(enc.encode(head), sent);
    }),
    // Bad chunked encoding.
    fc.tuple(
      path,
      fc.constantFrom("zz\r\n", "5\r\nab", "1\r\nabc\r\n", "-1\r\n"),
    )
      .map(([p, chunk]) =>
        enc.encode(
          `POST ${p} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${chunk}`,
        )
      ),
    // Conflicting or absurd framing headers.
    fc.tuple(
      path,
      fc.constantFrom(
        "Content-Length: 5\r\nContent-Length: 6",
        "Content-Length: -1",
        "Content-Length: 99999999999999999999",
        "Transfer-Encoding: chunked\r\nContent-Length: 3",
        "Expect: 100-continue\r\nContent-Length: 2",
        "Upgrade: websocket\r\nConnection: Upgrade",
      ),
    ).map(([p, h]) =>
      enc.encode(`POST ${p} HTTP/1.1\r\nHost: x\r\n${h}\r\n\r\n{}`)
    ),
    // Not HTTP at all, or a header line no parser should accept.
    fc.uint8Array({ minLength: 1, maxLength: 200 }),
    fc.tuple(printable(60), fc.uint8Array({ maxLength: 30 })).map((
      [line, tail],
    ) =>
      join(
        enc.encode(`GET /health HTTP/1.1\r\nHost: x\r\nX-A: ${line}`),
        tail,
        enc.encode("\r\n\r\n"),
      )
    ),
  ).map((bytes) => ({ kind: "raw" as const, bytes }));

export const httpCase = (oversize: number): fc.Arbitrary<HttpCase> =>
  fc.oneof(
    { weight: 9, arbitrary: fetchCase(oversize) },
    { weight: 1, arbitrary: rawCase(oversize) },
  );

function join(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

// ---- the worker door -------------------------------------------------------

/** Every frame type of the protocol, either direction (wrong-way ones too), and one that is none. */
const WORKER_TYPES = [
  ...WORKER_MESSAGE_TYPES,
  ...SERVER_MESSAGE_TYPES,
  "nonsense",
];

/**
 * A frame sent by a fake worker: a JSON value (serialized when sent), raw text,
 * binary, or a burst of one frame. A `request_id` of `{ pick: n }` names the
 * n-th live request id when the case runs (see `frameText`), so ids of other
 * workers' requests (the legit stream) can be among them.
 */
export type WorkerFrame =
  | { kind: "json"; value: unknown }
  | { kind: "text"; data: string }
  | { kind: "binary"; data: Uint8Array }
  | { kind: "flood"; value: unknown; count: number };

/** The text to send for a json or flood frame, with picked ids resolved. */
export function frameText(value: unknown, ids: string[]): string {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return JSON.stringify(value);
  }
  const o = { ...(value as Record<string, unknown>) };
  const r = o.request_id;
  if (typeof r === "object" && r !== null && "pick" in r) {
    const n = Number((r as { pick: unknown }).pick);
    o.request_id = ids.length === 0 ? "none" : ids[n % ids.length];
  }
  return JSON.stringify(o);
}

export const workerFrames: fc.Arbitrary<WorkerFrame[]> = (() => {
  const requestId = fc.oneof(
    fc.nat({ max: 7 }).map((i) => ({ pick: i })),
    anyText(12),
    wrongValue,
  );
  const validRegister = fc.record({
    type: fc.constant("register"),
    worker_name: fc.oneof(printable(20), wrongValue),
    models: fc.oneof(
      fc.array(fc.constantFrom("fuzz-model", " ", "", "*", "x".repeat(300)), {
        maxLength: 5,
      }),
      wrongValue,
    ),
    max_concurrent: fc.oneof(fc.integer({ min: -5, max: 5000 }), wrongValue),
    protocol_version: fc.oneof(
      fc.constantFrom("1", "2026-04-bridge-v1", "99"),
      wrongValue,
    ),
    current_load: fc.oneof(fc.nat({ max: 10 }), wrongValue),
    extensions: fc.oneof(
      fc.constant(["capabilities-v1", "lifecycle-v1"]),
      wrongValue,
    ),
  }, { requiredKeys: ["type"] });
  const anyFrame = fc.record({
    type: fc.oneof(fc.constantFrom(...WORKER_TYPES), wrongValue),
    request_id: requestId,
    chunk: anyText(40),
    status_code: fc.oneof(fc.constantFrom(200, 404, 99, 1000, 599), wrongValue),
    headers: fc.oneof(
      fc.dictionary(printable(10), printable(10), { maxKeys: 3 }),
      wrongValue,
    ),
    body: fc.oneof(anyText(40), wrongValue),
    models: fc.oneof(fc.array(printable(8), { maxLength: 3 }), wrongValue),
    current_load: fc.oneof(fc.nat({ max: 100 }), wrongValue),
    message: fc.oneof(anyText(20), wrongValue),
    task_id: fc.oneof(anyText(8), wrongValue),
    status: fc.oneof(
      fc.constantFrom("loading", "done", "failed", "x"),
      wrongValue,
    ),
    progress: fc.oneof(fc.double(), wrongValue),
    capabilities: fc.oneof(fc.jsonValue(), wrongValue),
  }, { requiredKeys: ["type"] });
  const value: fc.Arbitrary<unknown> = fc.oneof(
    { weight: 2, arbitrary: validRegister },
    { weight: 6, arbitrary: anyFrame },
    {
      weight: 1,
      arbitrary: fc.integer({ min: 70_000, max: 300_000 }).map((n) => ({
        type: "pong",
        pad: "p".repeat(n),
      })),
    },
  );
  const frame: fc.Arbitrary<WorkerFrame> = fc.oneof(
    {
      weight: 8,
      arbitrary: value.map((v) => ({ kind: "json" as const, value: v })),
    },
    {
      weight: 1,
      arbitrary: fc.oneof(
        anyText(50),
        deep,
        fc.constantFrom("{", "null", "[]", '{"type":"pong"', "\u0000"),
      ).map((data) => ({ kind: "text" as const, data })),
    },
    {
      weight: 1,
      arbitrary: fc.uint8Array({ maxLength: 32 }).map((data) => ({
        kind: "binary" as const,
        data,
      })),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(
        fc.oneof(validRegister, anyFrame),
        fc.integer({ min: 50, max: 400 }),
      ).map((
        [v, count],
      ) => ({ kind: "flood" as const, value: v, count })),
    },
  );
  return fc.array(frame, { minLength: 1, maxLength: 8 });
})();

/** How a fake worker opens: usually right, sometimes not. */
export type WorkerOpening = {
  secret: "right" | "wrong" | "none";
  query: string;
};

export const workerOpening: fc.Arbitrary<WorkerOpening> = fc.record({
  secret: fc.constantFrom("right", "right", "right", "right", "wrong", "none"),
  query: fc.oneof(
    { weight: 6, arbitrary: fc.constant("provider=local") },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        "",
        "provider=",
        "provider=nope",
        "provider=%zz",
        "secret=x",
      ),
    },
  ),
});
