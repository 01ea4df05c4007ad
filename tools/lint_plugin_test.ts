import assert from "node:assert/strict";
import plugin from "./lint_plugin.ts";

function messages(file: string, source: string): string[] {
  return Deno.lint.runPlugin(plugin, file, source).map((d) => d.message);
}

Deno.test("core purity lint rejects clock, randomness, Deno APIs and shell imports in core/", () => {
  const found = messages(
    "/repo/core/events/x.ts",
    `import { y } from "../../shell/server/y.ts";
const a = Date.now(); const b = Math.random(); const c = performance.now();
setTimeout(() => {}, 1); Deno.env.get("X"); fetch("http://x"); crypto.randomUUID();`,
  );
  assert.equal(found.length, 8, found.join("\n"));
});

Deno.test("core purity lint accepts pure code and property names that look like globals", () => {
  const found = messages(
    "/repo/core/state/x.ts",
    `import { z } from "zod"; import { q } from "../state/q.ts";
const o = { Date: 1, fetch: 2 }; const n = o.Date + Math.max(1, 2);`,
  );
  assert.deepEqual(found, []);
});

Deno.test("core purity lint applies to sim/ but not to the simulators' cli.ts files or shell/", () => {
  const cases: [file: string, code: string, found: number][] = [
    ["/repo/sim/run.ts", "Math.random();", 1],
    ["/repo/sim/cli.ts", "performance.now();", 0],
    ["/repo/sim/cluster/cli.ts", "performance.now();", 0],
    ["/repo/sim/cluster/world.ts", "performance.now();", 1],
    ["/repo/sim/models/cli.ts", "performance.now();", 0],
    ["/repo/sim/models/world.ts", "performance.now();", 1],
    ["/repo/shell/server/x.ts", "Date.now();", 0],
  ];
  for (const [file, code, found] of cases) {
    assert.equal(messages(file, code).length, found, file);
  }
});

Deno.test("core purity lint lets tests in core/ use Deno.test and nothing else of Deno", () => {
  assert.equal(
    messages("/repo/core/a_test.ts", `Deno.test("x", () => {});`).length,
    0,
  );
  assert.equal(
    messages("/repo/core/a_test.ts", `Deno.readTextFile("x");`).length,
    1,
  );
  assert.equal(
    messages("/repo/core/a.ts", `Deno.test("x", () => {});`).length,
    1,
  );
});
