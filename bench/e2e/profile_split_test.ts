import assert from "node:assert/strict";
import { split, stageOf } from "./profile_split.ts";

const frame = (functionName: string, url = "", lineNumber = 5) => ({
  functionName,
  url,
  lineNumber,
});

Deno.test("stageOf names our stages by file and the syscalls by name", () => {
  const cases: [string, string, string | null][] = [
    ["writev", "", "write"],
    ["decodeWorkerFrame", "file:///r/core/protocol/decode.ts", "parse"],
    ["encodeFrame", "file:///r/core/protocol/encode.ts", "frame"],
    ["reduce", "file:///r/core/reduce.ts", "decide"],
    ["record", "file:///r/shell/server/ops/usage_ledger.ts", "ledger"],
    ["hex", "file:///r/shell/server/ops/tracing.ts", "trace"],
    ["(garbage collector)", "", "gc"],
    // Deno's own ext:core is the runtime, not our core/.
    ["get", "ext:core/01_core.js", null],
  ];
  for (const [name, url, stage] of cases) {
    assert.equal(stageOf(frame(name, url)), stage, `${name} ${url}`);
  }
});

Deno.test("split charges a runtime leaf to the stage of ours that called it, leaves idle and startup out", () => {
  const nodes = [
    { id: 1, callFrame: frame("(root)"), children: [2, 3, 5, 7, 8] },
    { id: 2, callFrame: frame("(idle)"), children: [] },
    // respond (shell) → emit (runtime leaf): charged to shell.
    {
      id: 3,
      callFrame: frame("respond", "file:///r/shell/server/run_effects.ts"),
      children: [4],
    },
    { id: 4, callFrame: frame("emit", "ext:deno_node/_events.mjs") },
    // decode (parse) → writev leaf: the leaf's own stage wins.
    {
      id: 5,
      callFrame: frame(
        "decodeWorkerFrame",
        "file:///r/core/protocol/decode.ts",
      ),
      children: [6],
    },
    { id: 6, callFrame: frame("writev") },
    // A module's top-level evaluation: startup.
    {
      id: 7,
      callFrame: frame("", "file:///r/shell/server/main.ts", 0),
      children: [],
    },
    { id: 8, callFrame: frame("(program)") },
  ];
  const out = split({
    nodes,
    samples: [2, 4, 4, 6, 7, 8],
    timeDeltas: [100, 10, 20, 30, 40, 50],
  });
  assert.equal(out.get("shell"), 30);
  assert.equal(out.get("write"), 30);
  assert.equal(out.get("startup"), 40);
  assert.equal(out.get("runtime"), 50);
  assert.equal(out.get("parse"), 0);
  assert.equal([...out.values()].reduce((a, b) => a + b, 0), 150);
});
