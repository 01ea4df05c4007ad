// Issue 30 in a real browser (playwright-core driving Chromium, see
// _chromium.ts): the dashboard's grid of models × workers follows what each
// worker's residency report says.
import assert from "node:assert/strict";
import { ADMIN_TOKEN } from "../_relay_test_helpers.ts";
import { withBrowserAndRelay } from "./_browser_relay.ts";
import { registeredWorker } from "../_test_helpers.ts";

Deno.test({
  name:
    "issue 30: /dashboard shows models × workers, each cell loaded, loading, available or serves, and follows a new report",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withBrowserAndRelay(async (page, relay) => {
      const errors: string[] = [];
      page.on("pageerror", (e) => errors.push(String(e)));
      const box = await registeredWorker(relay, {
        worker_name: "gpu-box-1",
        models: ["model-a", "model-b", "model-c"],
        extensions: ["residency-v1"],
      });
      assert.ok(
        (box.ack.extensions as string[] | undefined)?.includes("residency-v1"),
      );
      box.send({
        type: "residency",
        loaded: ["model-a"],
        loading: ["model-b"],
        room: 1,
      });
      const old = await registeredWorker(relay, {
        worker_name: "old-box",
        models: ["model-a"],
      });
      await page.goto(`${relay.url}/dashboard`);
      await page.fill("#token", ADMIN_TOKEN);
      await page.click("#connect");
      const cell = (model: string, workerId: unknown) =>
        page.locator(
          `#residency tr[data-model="${model}"] td[data-worker-id="${workerId}"]`,
        );
      const boxId = box.ack.worker_id;
      const oldId = old.ack.worker_id;
      await cell("model-b", boxId).locator("[class~=res-loading]").waitFor();
      const state = async (model: string, workerId: unknown) =>
        await cell(model, workerId).getAttribute("data-state");
      assert.equal(await state("model-a", boxId), "loaded");
      assert.equal(await state("model-b", boxId), "loading");
      assert.equal(await state("model-c", boxId), "available");
      assert.equal(await state("model-a", oldId), "serves");
      assert.equal(await state("model-b", oldId), null, "not served there");
      assert.match(
        (await page.locator("#residency-head").textContent()) ?? "",
        /gpu-box-1\s*room 1/,
      );
      // A new report: b loaded in a's place.
      box.send({
        type: "residency",
        loaded: ["model-b"],
        loading: [],
        room: 1,
      });
      await cell("model-b", boxId).locator("[class~=res-loaded]").waitFor();
      assert.equal(await state("model-a", boxId), "available");
      assert.deepEqual(errors, []);
      await box.close();
      await old.close();
    }),
});
