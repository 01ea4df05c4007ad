// Issue 30, "Fakes and the real thing": two boxes with room for one model
// each, both listing models A and B. 20 requests alternating A,A,B,B,…, then
// 10 A and 10 B at once, through the relay's real server and workers: at
// most 2 loads in all (one per model, then everything is hot). Each test runs
// the same on fresh boxes with workers that report no residency (today's
// routing) and prints both counts.
import assert from "node:assert/strict";
import {
  type Box,
  FAKE_MODELS,
  loadsInAll,
  type Pair,
  report,
  ROUTER_MODELS,
  routerModelsDir,
  startFakeBox,
  startRouterBox,
  type SwapCount,
  swapScenarios,
  withFleet,
} from "./_fleet.ts";
import { llamaTest } from "./_llama.ts";
import { waitUntil } from "../shell/procs.ts";

async function run(
  boxes: Box[],
  models: Pair,
  original: boolean,
  maxConcurrent: number,
): Promise<SwapCount> {
  let count: SwapCount | null = null;
  await withFleet(boxes, async ({ serverUrl }) => {
    if (!original) {
      // Every worker has reported what its box holds (nothing yet).
      await waitUntil("the relay to know the boxes hold nothing", async () => {
        const list = await (await fetch(`${serverUrl}/v1/models`)).json();
        return (list.data as { status: string }[]).every((m) =>
          m.status === "available"
        );
      });
    }
    count = await swapScenarios(serverUrl, models, boxes);
    if (!original) {
      // The relay counted every load the boxes did.
      const text = await (await fetch(`${serverUrl}/metrics`)).text();
      const counted = [
        ...text.matchAll(/^modelrelay_model_loads_total\{[^}]*\} (\d+)$/gm),
      ].reduce((n, m) => n + Number(m[1]), 0);
      assert.equal(counted, loadsInAll(count), text);
      // Each was a load the relay started for a request it sent (reason
      // `demand`), none one a box did on its own (`reported`): the count is
      // the relay's decisions, not a box's restarts (C226).
      for (
        const m of text.matchAll(/^modelrelay_model_loads_total\{([^}]*)\}/gm)
      ) {
        assert.match(m[1]!, /reason="demand"/, text);
      }
    }
  }, original ? { original: { models } } : { maxConcurrent });
  return count!;
}

async function compare(
  what: string,
  models: Pair,
  boxes: () => Promise<Box[]>,
  maxConcurrent = 4,
  /** The real routers (see their test): hot-first must beat today's routing rather than hold 2. */
  realBackends = false,
): Promise<void> {
  const today = await run(await boxes(), models, true, maxConcurrent);
  console.log(report(`${what}, today's routing (no residency)`, today));
  const hot = await run(await boxes(), models, false, maxConcurrent);
  console.log(report(`${what}, hot-first`, hot));
  assert.deepEqual(hot.failed, []);
  if (realBackends) {
    // The sequential scenario is the figure: one load per model.
    assert.equal(hot.alternating, 2, "each model loads once, somewhere");
    // At once, a third load may follow by design (C226): the bound on
    // waiting lets the box whose model has no demand left load the other
    // model for its tail. No fourth: a model with demand is never evicted, so
    // the model that box gave up had no request left.
    assert.ok(loadsInAll(hot) <= 3, report(what, hot));
    assert.ok(loadsInAll(hot) < loadsInAll(today), report(what, hot));
    return;
  }
  assert.ok(loadsInAll(hot) <= 2, report(what, hot));
  assert.equal(hot.alternating, 2, "each model loads once, somewhere");
}

/** `compare` on two real llama-server routers over one models directory, removed after. */
async function compareRouters(
  what: string,
  maxConcurrent: number,
  realBackends = false,
): Promise<void> {
  const models = await routerModelsDir();
  try {
    await compare(
      what,
      ROUTER_MODELS,
      async () => [
        await startRouterBox(models.dir),
        await startRouterBox(models.dir),
      ],
      maxConcurrent,
      realBackends,
    );
  } finally {
    await models.drop();
  }
}

for (const dialect of ["ollama", "llama-swap"] as const) {
  Deno.test(`two ${dialect} boxes with room for one model: 20 alternating and 10 + 10 at once cause at most 2 loads in all`, async () => {
    await compare(
      `two ${dialect} boxes`,
      FAKE_MODELS,
      async () => [
        // Loads far slower than an answer (as on a GPU), so waiting for a
        // hot slot always beats loading.
        await startFakeBox(dialect, 600),
        await startFakeBox(dialect, 600),
      ],
    );
  });
}

llamaTest(
  "two real llama-server routers (--models-max 1, two copies of tiny.gguf, 4 slots each): 20 alternating cause 2 loads, 10 + 10 at once at most one more",
  async () => {
    // A tiny model loads in 0.1–0.5 s here (the relay measures it) and
    // this loaded CPU serves a request in about as long, so in the 10 + 10
    // burst the relay's bound on waiting (a request waits for a busy holder
    // no longer than a load takes) loads a third time, on the box whose model
    // has no demand left: read from the routers' logs and the relay's
    // metrics, docs/decisions.md C226. The 20 alternating cause exactly 2;
    // at most 3 in all, and fewer than today, is asserted. A router now
    // and then hangs up on a request ("socket hang up"); the relay sends it
    // to another box holding the model, else back to the box that holds it
    // (docs/decisions.md C220), so every request is still answered.
    await compareRouters("two llama-server routers", 4, true);
  },
);

llamaTest(
  "two real llama-server routers whose workers take the whole burst (MAX_CONCURRENT 10): 20 alternating and 10 + 10 at once cause at most 2 loads in all",
  async () => {
    // The figure with the real routers: with a slot for each of a
    // model's 10 requests (the router queues them in its own 4 slots), no
    // request waits at the relay behind a busy holder, so neither the wait
    // estimate nor the bound on waiting ever prefers a load, however fast the
    // tiny model loads; what is left is placement itself. C226: the third load
    // of the test above comes from that wait (2 loads in all in every run here).
    await compareRouters("two llama-server routers, MAX_CONCURRENT 10", 10);
  },
);
