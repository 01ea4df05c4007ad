import assert from "node:assert/strict";
import { resumeAfterHold, type ResumeCheck } from "./log_hold.ts";

const base: ResumeCheck = {
  heldSinceMs: 1_000,
  nowMs: 6_000,
  lostAfterMs: 15_000,
  epochNow: "e1",
  epochMine: "e1",
  snapshotMs: 90_000,
  appliedMs: 91_000,
  snapshotEveryMs: 5_000,
};

Deno.test("log hold: a log that blinked and kept its entries is resumed under the same id", () => {
  assert.deepEqual(resumeAfterHold(base), { kind: "resume" });
  assert.deepEqual(
    resumeAfterHold({ ...base, snapshotMs: 95_000 }),
    { kind: "resume" },
    "one snapshot ahead trims only up to the previous one",
  );
});

Deno.test("log hold: a reset log, a hold longer than the limit, or a tail trimmed away gives up what the instance holds", () => {
  assert.equal(resumeAfterHold({ ...base, epochNow: "e2" }).kind, "giveUp");
  assert.equal(resumeAfterHold({ ...base, nowMs: 16_001 }).kind, "giveUp");
  assert.equal(
    resumeAfterHold({ ...base, snapshotMs: 96_001 }).kind,
    "giveUp",
  );
});
