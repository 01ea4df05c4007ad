import assert from "node:assert/strict";
import { cacheReportOf } from "./cache_report.ts";

Deno.test("a cache report needs X-Cache-Hit, in any letter case", () => {
  assert.equal(cacheReportOf({ "x-cache-tokens-reused": "5" }), null);
  assert.deepEqual(
    cacheReportOf({ "X-Cache-Hit": " TRUE ", "X-Cache-Tokens-Reused": "12" }),
    { hit: true, tokensReused: 12 },
  );
});

Deno.test("reused tokens that are not a positive number count as none", () => {
  assert.deepEqual(
    cacheReportOf({ "x-cache-hit": "false", "x-cache-tokens-reused": "-3" }),
    { hit: false, tokensReused: 0 },
  );
  assert.deepEqual(
    cacheReportOf({ "x-cache-hit": "true", "x-cache-tokens-reused": "many" }),
    { hit: true, tokensReused: 0 },
  );
});
