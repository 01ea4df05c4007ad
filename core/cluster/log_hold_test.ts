import assert from "node:assert/strict";
import { resumeAfterHold, type ResumeCheck } from "./log_hold.ts";

const base: ResumeCheck = {
  heldSinceMs: 1_000,
  nowMs: 6_000,
  lostAfterMs: 15_000,
  epochNow: "e1",
  epochMine: "e1",
  lastEntryKept: true,
};

Deno.test("log hold: a log that blinked and kept its entries is resumed under the same id, however long its silence in log time", () => {
  assert.deepEqual(resumeAfterHold(base), { kind: "resume" });
  assert.deepEqual(
    resumeAfterHold({ ...base, lastEntryKept: null }),
    { kind: "resume" },
  );
});

Deno.test("log hold: a reset log, a hold longer than the limit, or a log without this replica's last entry (trimmed, or a failover that lost its tail) gives up what the instance holds", () => {
  assert.equal(resumeAfterHold({ ...base, epochNow: "e2" }).kind, "giveUp");
  assert.equal(resumeAfterHold({ ...base, nowMs: 16_001 }).kind, "giveUp");
  assert.equal(
    resumeAfterHold({ ...base, lastEntryKept: false }).kind,
    "giveUp",
  );
});
