import assert from "node:assert/strict";
import fc from "fast-check";
import {
  bodyFitsOneFrame,
  frameRoomBytes,
  utf8Bytes,
} from "../../core/protocol/frame_limit.ts";

const text = fc.string({ unit: "binary", maxLength: 40 });

Deno.test("issue 31: bodyFitsOneFrame's cheap bounds never change its answer: a body fits exactly when its JSON's bytes fit the room", () => {
  fc.assert(
    fc.property(
      fc.dictionary(text, text, { maxKeys: 4 }),
      text,
      text,
      fc.integer({ min: -300, max: 300 }),
      (headers, requestId, body, slack) => {
        const exact = utf8Bytes(JSON.stringify(body));
        // A frame limit around the one where the body just fits.
        const max = exact + 1024 + utf8Bytes(JSON.stringify(headers)) +
          utf8Bytes(requestId) + slack;
        assert.equal(
          bodyFitsOneFrame(body, headers, requestId, max),
          exact <= frameRoomBytes(headers, requestId, max),
        );
      },
    ),
    { numRuns: 3000 },
  );
});
