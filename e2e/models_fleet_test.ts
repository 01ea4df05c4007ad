// Issue 30, "Fakes and the real thing": two boxes with room for one model
// each, both listing models A and B. 20 requests alternating A/B, then 10 A
// and 10 B at once, through the relay's real server and workers. Each run
// prints how many loads the boxes did.
import assert from "node:assert/strict";
import {
  type Box,
  FAKE_MODELS,
  report,
  ROUTER_MODELS,
  routerModelsDir,
  startFakeBox,
  startRouterBox,
  swapScenarios,
  withFleet,
} from "./_fleet.ts";
import { LLAMA_ABSENT } from "./_llama.ts";

for (const dialect of ["ollama", "llama-swap"] as const) {
  Deno.test(`fleet of two ${dialect} boxes with room for one model: every request answered, loads counted`, async () => {
    const boxes: Box[] = [
      await startFakeBox(dialect, 300),
      await startFakeBox(dialect, 300),
    ];
    await withFleet(boxes, async ({ serverUrl }) => {
      const count = await swapScenarios(serverUrl, FAKE_MODELS, boxes);
      console.log(report(`two ${dialect} boxes`, count));
      // Each model needs one load somewhere before anything is hot.
      assert.deepEqual(count.failed, []);
      assert.ok(count.alternating >= 2, JSON.stringify(count));
    });
  });
}

Deno.test({
  name:
    "fleet of two real llama-server routers (--models-max 1, two copies of tiny.gguf): every request answered, loads counted",
  ignore: LLAMA_ABSENT,
}, async () => {
  const models = await routerModelsDir();
  try {
    const boxes: Box[] = [
      await startRouterBox(models.dir),
      await startRouterBox(models.dir),
    ];
    await withFleet(boxes, async ({ serverUrl }) => {
      const count = await swapScenarios(serverUrl, ROUTER_MODELS, boxes);
      console.log(report("two llama-server routers", count));
      assert.ok(count.alternating >= 2, JSON.stringify(count));
    });
  } finally {
    await models.drop();
  }
});
