import assert from "node:assert/strict";
import { ownerOf, split, splitByOwner, stageOf } from "./profile_split.ts";

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

Deno.test("ownerOf tells our code from the runtime's ops, its JS and packages", () => {
  const cases: [string, string, string][] = [
    ["reduce", "file:///r/core/reduce.ts", "ours"],
    ["parseHead", "file:///r/shell/server/door/request_parser.ts", "ours"],
    ["op_write", "", "runtime ops"],
    ["writeUtf8String", "", "runtime ops"],
    ["__eventLoopTick", "ext:core/01_core.js", "runtime JS"],
    ["nextTick", "ext:deno_node/_next_tick.ts", "runtime JS"],
    [
      "parse",
      "file:///root/.cache/deno/npm/registry.npmjs.org/zod/4.1.12/v4/core/parse.js",
      "packages",
    ],
    ["(garbage collector)", "", "gc"],
    ["(program)", "", "program"],
    ["RegExp: [^\\t\\x20-\\x7e]", "", "ours"],
  ];
  for (const [name, url, owner] of cases) {
    assert.equal(ownerOf(frame(name, url)), owner, `${name} ${url}`);
  }
});

Deno.test("splitByOwner charges each sample to its leaf alone, leaves idle and startup out", () => {
  const nodes = [
    { id: 1, callFrame: frame("(root)"), children: [2, 3, 5] },
    { id: 2, callFrame: frame("(idle)"), children: [] },
    // respond (ours) → op_write: the op's, not ours.
    {
      id: 3,
      callFrame: frame("respond", "file:///r/shell/server/run_effects.ts"),
      children: [4],
    },
    { id: 4, callFrame: frame("op_write") },
    // A module's top-level evaluation and what it calls: startup.
    {
      id: 5,
      callFrame: frame("", "file:///r/shell/server/main.ts", 0),
      children: [6],
    },
    { id: 6, callFrame: frame("reduce", "file:///r/core/reduce.ts") },
  ];
  const out = splitByOwner({
    nodes,
    samples: [2, 3, 4, 4, 6],
    timeDeltas: [100, 7, 10, 20, 40],
  });
  assert.equal(out.get("ours"), 7);
  assert.equal(out.get("runtime ops"), 30);
  assert.equal([...out.values()].reduce((a, b) => a + b, 0), 37);
});
