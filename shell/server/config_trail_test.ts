// Issue 27: after start, no closure of the assembly reads the configuration
// again: each route was handed its part (tools/config_trail.ts counts how).
import assert from "node:assert/strict";
import { measureTrail } from "../../tools/config_trail_run.ts";

Deno.test("the configuration never comes back to a module it left: every route is handed its part", async () => {
  const trail = await measureTrail();
  assert.ok(trail.reads > 0, "the configuration was never read");
  assert.ok(
    trail.modules.includes("shell/server/relay.ts"),
    trail.modules.join(),
  );
  assert.deepEqual(trail.returns, []);
});
