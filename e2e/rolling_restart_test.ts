// Issue 24, item 4, with real processes: restarting the only worker of a model
// while a worker of another model stays connected. On main (3c0e934) a request
// arriving in the gap between the old worker's exit and the new one's
// registration got 404 model_not_found, which SDKs do not retry.
import assert from "node:assert/strict";
import {
  chat,
  faultTest,
  startMock,
  startServer,
  startWorker,
} from "./_faults.ts";

faultTest(
  "issue 24.4 no 404 in a rolling restart: a request for the restarting worker's model waits for its return while another model's worker is connected",
  async (started) => {
    const mock = await startMock(started);
    const server = await startServer(started);
    const first = await startWorker(started, "only-a", server, mock.url, {
      MODELS: "model-a",
    });
    await startWorker(started, "only-b", server, mock.url, {
      MODELS: "model-b",
    });
    assert.equal((await chat(server, { model: "model-a" })).status, 200);
    first.kill("SIGTERM");
    await first.status;
    // The gap: model-a has no worker, model-b's is connected.
    let settled = false;
    const inGap = chat(server, { model: "model-a", max_tokens: 3 }).finally(
      () => settled = true,
    );
    await new Promise((r) => setTimeout(r, 800));
    assert.equal(
      settled,
      false,
      "answered before any worker of model-a came back",
    );
    await startWorker(started, "only-a-again", server, mock.url, {
      MODELS: "model-a",
    });
    const r = await inGap;
    assert.equal(r.status, 200, r.text);
    // A model no worker ever served is still 404 at once.
    assert.equal((await chat(server, { model: "never-served" })).status, 404);
  },
);
