// Issue 33 (LOW 9) with real processes: a model whose only worker left waits
// out MODEL_GRACE_SECS in the queue, but holds at most a quarter of
// MAX_QUEUE_LEN there, so another tenant's live model still queues (no 503
// queue_full) while 100 requests for the gone model are outstanding.
import assert from "node:assert/strict";
import { type Child, waitUntil } from "../shell/procs.ts";
import {
  startMockProcess,
  startRelayProcesses,
} from "../shell/demo/cluster.ts";
import { workersConnected } from "../shell/demo/relay_probes.ts";
import { postChat } from "./_post_chat.ts";

const SECRET = "e2e-grace-queue";

function chat(
  url: string,
  model: string,
  tenant: string,
  signal?: AbortSignal,
): Promise<Response> {
  return postChat(url, {
    model,
    messages: [{ role: "user", content: "hi" }],
    max_tokens: 10,
    stream: true,
  }, {
    headers: { "x-tenant-id": tenant },
    ...(signal === undefined ? {} : { signal }),
  });
}

Deno.test("issue 33 100 requests for a model in its grace period leave room in the queue for another tenant's live model", async () => {
  const started: Child[] = [];
  const gone = new AbortController();
  try {
    const mock = await startMockProcess({
      delayMs: 30,
      models: ["model-gone", "model-live"],
    });
    started.push(mock.child);
    const { server, workers: [leaving] } = await startRelayProcesses(started, {
      secret: SECRET,
      serverEnv: {
        TICK_MS: "20",
        MAX_QUEUE_LEN: "20",
        MODEL_GRACE_SECS: "300",
      },
      workers: [
        { name: "gone", backendUrl: mock.url, env: { MODELS: "model-gone" } },
        {
          name: "live",
          backendUrl: mock.url,
          maxConcurrent: 1,
          env: { MODELS: "model-live" },
        },
      ],
    });
    await leaving!.stop(5_000);
    await waitUntil(
      "the gone model's worker left",
      async () => (await workersConnected(server.url)) === 1,
    );

    let answered = 0;
    const refusals: string[] = [];
    const goneRequests = Array.from(
      { length: 100 },
      () =>
        chat(server.url, "model-gone", "t1", gone.signal).then(async (r) => {
          answered++;
          if (r.status === 503) refusals.push((await r.json()).error.code);
          else await r.body?.cancel();
        }, () => {}),
    );
    // The queue holds what it may; the rest are told at once.
    await waitUntil(
      "the gone model's overflow answered",
      () => Promise.resolve(answered >= 80),
    );

    // Two at once for the live model: its worker takes one, the other waits.
    const live = await Promise.all([
      chat(server.url, "model-live", "t2"),
      chat(server.url, "model-live", "t2"),
    ]);
    for (const r of live) {
      const text = await r.text();
      assert.equal(r.status, 200, text);
      assert.match(text, /\[DONE\]/);
    }
    // A quarter of MAX_QUEUE_LEN (5) waits for the gone model's worker.
    assert.equal(answered, 95);
    assert.deepEqual(new Set(refusals), new Set(["queue_full"]));
    gone.abort();
    await Promise.all(goneRequests);
  } finally {
    gone.abort();
    for (const c of started.reverse()) await c.stop(5_000);
  }
});
