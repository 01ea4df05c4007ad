// `deno task test:cluster`, issue 30: a waiting stream's keep-alive and
// progress lines in cluster mode. The lines are decided by the replicated core
// on its ticks and written by the instance holding the client; the backend's
// bytes go direct from the worker's instance as any stream's. A client on the
// other instance than the worker reads the lines, then exactly the backend's
// events.
import assert from "node:assert/strict";
import { MODEL, withHolderAndClient } from "./_fleet.ts";
import { startSwappingBackend } from "../../../mock/swapping.ts";
import { waitUntil } from "../../procs.ts";
import { postChat } from "../../../e2e/_post_chat.ts";

const ANSWER = "Loaded across the fleet and streamed in order.";

Deno.test("cluster: a stream waiting for a load on another instance's worker gets its keep-alive and loading lines, then the backend's events exactly", async () => {
  const box = await startSwappingBackend({
    dialect: "ollama",
    models: [MODEL],
    loadDelayMs: 2_500,
    chunkDelayMs: 5,
    answer: ANSWER,
  });
  try {
    await withHolderAndClient(
      "keep-w1",
      box.url,
      { SSE_KEEPALIVE_SECS: "1" },
      async ({ client, f }) => {
        // Every instance knows the worker's backend holds nothing yet.
        for (const at of f.instances) {
          await waitUntil(
            `${at.url} to know the box holds nothing`,
            async () => {
              const res = await fetch(`${at.url}/v1/models/${MODEL}`);
              return (await res.json()).status === "available";
            },
          );
        }
        const res = await postChat(client.url, {
          model: MODEL,
          stream: true,
          messages: [{ role: "user", content: "hi" }],
        }, { headers: { "x-modelrelay-progress": "1" } });
        assert.equal(res.status, 200);
        const lines = (await res.text()).split("\n").filter((l) => l !== "");
        const firstData = lines.findIndex((l) => l.startsWith("data: "));
        const before = lines.slice(0, firstData);
        assert.equal(before[0], `: loading model=${MODEL}`, lines.join("\n"));
        assert.ok(before.slice(1).includes(": keep-alive"), lines.join("\n"));
        const content = lines.slice(firstData)
          .filter((l) => l.startsWith("data: {"))
          .map((l) => JSON.parse(l.slice(6)).choices[0]?.delta?.content ?? "")
          .join("");
        assert.equal(content, ANSWER);
        assert.equal(lines.at(-1), "data: [DONE]");
        assert.equal(box.stats.loads, 1);
      },
    );
  } finally {
    await box.close();
  }
});
