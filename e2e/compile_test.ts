// `deno task compile` cannot run here (it downloads the Deno runtime per target),
// so what is checked is that its entry points type-check, i.e. stay compilable,
// and that every binary gets explicit permissions and every promised platform.
import assert from "node:assert/strict";
import { runDeno } from "../shell/procs.ts";
import { BINARIES, compileCommands, TARGETS } from "../tools/compile.ts";

Deno.test("compile: the server and worker entry points type-check", async () => {
  const out = await runDeno(["check", ...BINARIES.map((b) => b.entry)]);
  assert.equal(out.code, 0, out.stderr);
});

Deno.test("compile: one binary per entry point and target, for linux/macOS x86_64+arm64 and windows x86_64, with explicit permissions", () => {
  const commands = compileCommands();
  assert.equal(commands.length, BINARIES.length * 5);
  assert.deepEqual([...TARGETS].sort(), [
    "aarch64-apple-darwin",
    "aarch64-unknown-linux-gnu",
    "x86_64-apple-darwin",
    "x86_64-pc-windows-msvc",
    "x86_64-unknown-linux-gnu",
  ]);
  for (const { output, args } of commands) {
    assert.match(output, /^dist\//);
    assert.ok(!args.includes("-A") && !args.includes("--allow-all"));
    assert.ok(args.some((a) => a.startsWith("--allow-net")));
  }
});

Deno.test("the demo and the e2e mock process type-check (deno run, which spawns them, does not check)", async () => {
  const out = await runDeno([
    "check",
    "shell/demo/main.ts",
    "e2e/_mock_with_stats.ts",
  ]);
  assert.equal(out.code, 0, out.stderr);
});
