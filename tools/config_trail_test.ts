import assert from "node:assert/strict";
import { chainOf, trailOf } from "./config_trail.ts";

const ROOT = "file:///repo/";

Deno.test("a stack becomes its shell modules, outermost first, repeats folded", () => {
  const stack = [
    "Error",
    "    at Object.get (file:///repo/tools/config_trail_run.ts:10:5)",
    "    at authorize (file:///repo/shell/server/relay.ts:120:9)",
    "    at handle (file:///repo/shell/server/http/client_http.ts:50:3)",
    "    at route (file:///repo/shell/server/http/client_http.ts:40:3)",
    "    at file:///repo/shell/server/server.ts:88:7",
    "    at emit (node:events:1:1)",
  ].join("\n");
  assert.deepEqual(chainOf(stack, ROOT), [
    "shell/server/server.ts",
    "shell/server/http/client_http.ts",
    "shell/server/relay.ts",
  ]);
});

Deno.test("the trail counts each module once and each distinct return once", () => {
  const trail = trailOf([
    ["relay.ts", "server.ts", "relay.ts"],
    ["relay.ts", "server.ts", "relay.ts"],
    ["relay.ts", "server.ts", "http.ts", "server.ts", "relay.ts"],
    ["server.ts", "http.ts"],
  ]);
  assert.deepEqual(trail.modules, ["http.ts", "relay.ts", "server.ts"]);
  assert.deepEqual(trail.returns, [
    "relay.ts > server.ts > http.ts > server.ts",
    "relay.ts > server.ts > http.ts > server.ts > relay.ts",
    "relay.ts > server.ts > relay.ts",
  ]);
});

Deno.test("a chain that never comes back has no returns", () => {
  assert.deepEqual(trailOf([["a.ts", "b.ts", "c.ts"]]), {
    modules: ["a.ts", "b.ts", "c.ts"],
    returns: [],
  });
});
