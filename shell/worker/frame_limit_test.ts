import assert from "node:assert/strict";
import { DEFAULT_CONFIG } from "../../core/mod.ts";
import { PROTOCOL_FRAME_MAX } from "../../core/protocol/mod.ts";
import { WORKER_FRAME_BYTES_MAX } from "../../core/worker/mod.ts";
import { RESPONSE_FRAME_BYTES_MAX } from "./answer_readers.ts";

Deno.test("one frame limit: the server's default, the worker core's and the worker shell's are the protocol's 16 MiB", () => {
  assert.equal(PROTOCOL_FRAME_MAX, 16 * 1024 * 1024);
  assert.deepEqual(
    [
      DEFAULT_CONFIG.frameCharsMax,
      WORKER_FRAME_BYTES_MAX,
      RESPONSE_FRAME_BYTES_MAX,
    ],
    [PROTOCOL_FRAME_MAX, PROTOCOL_FRAME_MAX, PROTOCOL_FRAME_MAX],
  );
});
