// The hand-written decoders of the per-request frames (core/protocol/decode.ts,
// issue 10) against the zod schemas they stand in for, on generated frames.
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  decodeServerFrame,
  decodeWorkerFrame,
} from "../../core/protocol/decode.ts";
import {
  serverMessageSchema,
  workerMessageSchema,
} from "../../core/protocol/messages.ts";

const MAX = 1_000_000;

// The hand-written guards for `request` and `response_complete` (issue 10) must
// accept exactly what zod accepts and return exactly what zod returns: same
// fields, same order, unknown ones dropped, absent ones absent.
const anyValue = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.boolean(),
  fc.string(),
  fc.integer({ min: -5, max: 5 }),
  fc.constantFrom(99, 100, 200, 999, 1000, 0xffff_ffff, 2 ** 32, 1.5, -0),
  fc.dictionary(
    fc.string(),
    fc.oneof(fc.string(), fc.integer(), fc.constant(null)),
  ),
  fc.array(fc.string(), { maxLength: 2 }),
);
const headersValue = fc.oneof(
  anyValue,
  fc.dictionary(
    fc.constantFrom("a", "B", "__proto__", "1", "x-y"),
    fc.string(),
  ),
);
const countValue = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.constantFrom(0, 1, 0xffff_ffff, 2 ** 32, -1, 1.5, "3"),
);
const tokenCountsValue = fc.oneof(
  anyValue,
  fc.record({
    prompt_tokens: countValue,
    completion_tokens: countValue,
    total_tokens: countValue,
    extra: anyValue,
  }, { requiredKeys: [] }),
);

/** The object as JSON would deliver it: no undefined-valued keys. */
function asJson(o: Record<string, unknown>): Record<string, unknown> {
  return JSON.parse(JSON.stringify(o));
}

type Decoded = { ok: true; message: unknown } | { ok: false; error: unknown };
type Parsed = { success: true; data: unknown } | { success: false };

function assertSameAsZod(
  got: Decoded,
  want: Parsed,
  text: string,
): void {
  assert.equal(got.ok, want.success, text);
  if (got.ok && want.success) {
    assert.deepEqual(got.message, want.data, text);
    assert.equal(JSON.stringify(got.message), JSON.stringify(want.data), text);
  }
}

/**
 * Frames of `type` with generated fields, any of them absent and an unknown
 * one beside them: the guard answers exactly as zod.
 */
function decodesAsZod(
  decode: (text: string, maxChars: number) => Decoded,
  schema: { safeParse(o: unknown): Parsed },
  type: string,
  fields: Record<string, fc.Arbitrary<unknown>>,
): void {
  const frames = fc.record({ ...fields, extra: anyValue }, {
    requiredKeys: [],
  });
  fc.assert(
    fc.property(frames, (f) => {
      const obj = asJson({ type, ...f });
      const text = JSON.stringify(obj);
      assertSameAsZod(decode(text, MAX), schema.safeParse(obj), text);
    }),
    { numRuns: 2000 },
  );
}

Deno.test("request: the hand-written guard decodes exactly as the zod schema", () => {
  decodesAsZod(decodeServerFrame, serverMessageSchema, "request", {
    request_id: fc.oneof(fc.string(), anyValue),
    model: fc.oneof(fc.string(), anyValue),
    endpoint_path: fc.oneof(fc.string(), anyValue),
    is_streaming: fc.oneof(fc.boolean(), anyValue),
    body: fc.oneof(fc.string(), anyValue),
    headers: headersValue,
  });
});

Deno.test("response_complete: the hand-written guard decodes exactly as the zod schema", () => {
  decodesAsZod(decodeWorkerFrame, workerMessageSchema, "response_complete", {
    request_id: fc.oneof(fc.string(), anyValue),
    status_code: fc.oneof(fc.integer({ min: 90, max: 1010 }), anyValue),
    headers: headersValue,
    body: fc.oneof(fc.string(), anyValue),
    token_counts: tokenCountsValue,
  });
});
