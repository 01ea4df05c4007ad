import assert from "node:assert/strict";
import { markdown } from "./report.ts";

Deno.test("markdown pads, right-aligns and drops columns empty below the header", () => {
  const out = markdown([
    ["id", "nginx", "relay"],
    ["(a)", "", "1,234"],
    ["(b)", "", "5"],
  ], new Set([1, 2]));
  assert.equal(
    out,
    [
      "| id  | relay |",
      "|-----|------:|",
      "| (a) | 1,234 |",
      "| (b) |     5 |",
    ].join("\n"),
  );
});
