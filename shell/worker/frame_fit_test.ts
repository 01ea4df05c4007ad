// Issue 27: one frame-fit rule. The worker core (core/worker/answers.ts
// `completionFrames`) and the worker shell (answer_readers.ts, a buffered
// answer) used to decide "does this answer fit one frame" in characters and in
// bytes; both now ask `bodyFitsOneFrame` (core/protocol/frame_limit.ts), in
// bytes. Each case runs the real 16 MiB limit through both paths.
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import {
  bodyFitsOneFrame,
  frameRoomBytes,
  PROTOCOL_FRAME_MAX,
  type RequestMessage,
  utf8Bytes,
} from "../../core/protocol/mod.ts";
import { type Completion, completionFrames } from "../../core/worker/mod.ts";
import { registeredWith } from "../../core/worker/_testing.ts";
import {
  type AnswerBody,
  type BackendOutcome,
  readAnswer,
} from "./answer_readers.ts";

const ID = "req-frame-fit";
const HEADERS = { "content-type": "application/json" };
/** The bytes a frame leaves for the body's JSON string, quotes included. */
const ROOM = frameRoomBytes(HEADERS, ID, PROTOCOL_FRAME_MAX);

/** The worker shell's decision: a buffered answer read through `readAnswer`. */
function shellFits(body: string): boolean {
  let outcome: BackendOutcome | null = null;
  const chunks: AnswerBody = {
    onData(f) {
      f(Buffer.from(body));
    },
    onEnd(f) {
      f();
    },
    pause() {},
    resume() {},
    isPaused: () => false,
  };
  readAnswer(
    200,
    HEADERS,
    chunks,
    {
      request_id: ID,
      endpoint_path: "/v1/chat/completions",
      is_streaming: false,
    } as RequestMessage,
    { chunk() {}, chunkBytes: false, bodyChunks: false, hasRoom: () => true },
    {
      done(o) {
        outcome ??= o;
      },
      failed() {},
      invalid() {},
      settled: () => outcome !== null,
      started: () => false,
      markStarted() {},
      headArrived() {},
      destroy() {},
    },
  );
  const o = outcome as BackendOutcome | null;
  assert(o !== null && o.kind === "completed");
  return o.completion.status_code === 200;
}

/** The worker core's decision, for an original server (no body-chunks-v1). */
function coreFits(body: string): boolean {
  const state = registeredWith(null, {
    responseFrameBytesMax: PROTOCOL_FRAME_MAX,
  });
  const c: Completion = {
    status_code: 200,
    headers: HEADERS,
    body,
    token_counts: null,
  };
  const frames = completionFrames(state, ID, "/v1/chat/completions", c);
  assert.equal(frames.length, 1);
  const m = frames[0];
  assert(m !== undefined && m.type === "response_complete");
  return m.status_code === 200;
}

function decide(
  body: string,
): { core: boolean; shell: boolean; rule: boolean } {
  return {
    core: coreFits(body),
    shell: shellFits(body),
    rule: bodyFitsOneFrame(body, HEADERS, ID, PROTOCOL_FRAME_MAX),
  };
}

const FITS = { core: true, shell: true, rule: true };
const DOES_NOT = { core: false, shell: false, rule: false };

Deno.test("frame fit: an answer of exactly the limit fits, on the worker core's and the worker shell's path alike", () => {
  const body = "x".repeat(ROOM - 2); // its JSON string: ROOM bytes
  assert.equal(utf8Bytes(JSON.stringify(body)), ROOM);
  assert.deepEqual(decide(body), FITS);
});

Deno.test("frame fit: one byte over the limit is too large on both paths", () => {
  const body = "x".repeat(ROOM - 1);
  assert.deepEqual(decide(body), DOES_NOT);
});

Deno.test("frame fit: multi-byte UTF-8 near the limit is counted in bytes on both paths, not characters", () => {
  // 2-, 3- and 4-byte characters (the last a surrogate pair: 2 UTF-16 units).
  for (const ch of ["é", "€", "😀"]) {
    const bytes = utf8Bytes(ch);
    const n = Math.floor((ROOM - 2) / bytes);
    const pad = ROOM - 2 - n * bytes; // ASCII to land exactly on the limit
    const exact = ch.repeat(n) + "x".repeat(pad);
    assert.equal(utf8Bytes(JSON.stringify(exact)), ROOM);
    assert.deepEqual(decide(exact), FITS, `${ch} at the limit`);
    // One more byte: over, though far fewer characters than the limit (the
    // former character rule of the worker core would have let it through).
    const over = exact + "x";
    assert(JSON.stringify(over).length < ROOM);
    assert.deepEqual(decide(over), DOES_NOT, `${ch} one byte over`);
  }
});

Deno.test("frame fit: JSON escapes count as the bytes they take", () => {
  // A quote escapes to 2 bytes, a control character to 6 (\u0001).
  for (const ch of ['"', "\u0001"]) {
    const bytes = JSON.stringify(ch).length - 2;
    const n = Math.floor((ROOM - 2) / bytes);
    const exact = ch.repeat(n) + "x".repeat(ROOM - 2 - n * bytes);
    assert.deepEqual(decide(exact), FITS);
    assert.deepEqual(decide(exact + "x"), DOES_NOT);
  }
});

Deno.test("utf8Bytes counts as node's Buffer.byteLength does, lone surrogates included", () => {
  for (
    const s of [
      "",
      "abc",
      "é€😀",
      "\ud800x",
      "x\udc00",
      "\ud83d",
      "a\u0000\u07ff\u0800\uffff",
    ]
  ) {
    assert.equal(utf8Bytes(s), Buffer.byteLength(s), JSON.stringify(s));
  }
});
